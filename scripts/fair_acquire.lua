-- fair_acquire.lua: queue a waiter of a fair lock (Options.Fair) on one node, renew
-- its entry's lease, and take the lock if the waiter is the head of the queue.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the key's waiter queue (sorted set: waiter id, score = ticket); the head is
--          the entry with the lowest (ticket, id), the same on every node
-- KEYS[3]  the key's waiter leases (sorted set: waiter id, score = end of its lease
--          in ms on this node's clock)
-- KEYS[4]  the key's ticket counter (see fair_ticket.lua)
-- ARGV[1]  the token of this attempt
-- ARGV[2]  the lock's time to live in milliseconds
-- ARGV[3]  the waiter's id (one per Acquire call), or "" for a TryAcquire, which does
--          not queue and takes the lock only when nobody is queued
-- ARGV[4]  the waiter's ticket, the same on every node (ignored when ARGV[3] is "")
-- ARGV[5]  the entry lease in milliseconds (ignored when ARGV[3] is "")
-- ARGV[6]  the owner's head for a hold of an owner (WithOwner), whose id is then
--          ARGV[1]; "" (or absent) for a lock without owner
-- KEYS[5], ARGV[7..9]  optional, for a waiter without owner: the key's hand
--          registrations (fair_queue.lua) and the waiter's next registration (TTL in
--          ms, token, seq). ARGV[1] is then the token of its previous registration (seq
--          ARGV[9] − 1): a key handed with it is the waiter's, and the attempt answers
--          1 at once, raising its TTL to ARGV[2]; a key handed with an older one is
--          deleted. An attempt that does not get the key registers ARGV[7..9]; one that
--          gets it drops the waiter's registration
--
-- A hold of an owner that holds the key already is added at once, ahead of the queue
-- and without queueing (reentrancy: the owner's holds are one logical holder, and the
-- waiters queued wait for that holder anyway); otherwise the owner's waiter queues
-- like any other, and takes a free key as the owner's head followed by its hold.
--
-- Entries whose lease ended are dropped first: a dead waiter blocks the queue for at
-- most one lease after its last renewal. Returns 1 when the key now holds ARGV[1]
-- (newly set, or by this same token), or for an owner lists the hold ARGV[1]; for a
-- waiter that did not get it, −(2^40 − a), where a is the number of entries ahead of
-- it (0: it is the head and another token holds the key), so that the client learns
-- the fewest ahead on any node from the largest absolute value; 0 for a TryAcquire
-- that did not get it. A lease, a TTL or the counter is only ever raised. A late copy
-- of a finished Acquire's call puts its entry back for at most one lease, and can set
-- the key with a dead token for at most its TTL, as acquire.lua's copies can; an
-- owner's copy can list a hold that is over on the owner's key, which then lives
-- until its TTL, as reentrant_acquire.lua's can.

-- fairQueueTold and BEHIND come from fair_queue.lua, ownerAdd from fair_owner.lua, both
-- put in front of this file.
local key, id, head = KEYS[1], ARGV[3], ARGV[6] or ''
if head ~= '' and ownerAdd(key, head, ARGV[1], ARGV[2]) then
  return 1
end
local hands = id ~= '' and head == '' and HANDS and ARGV[9]
local freed = nil -- the token of a stale hand this attempt deleted
-- register records the waiter's hand registration (fair_queue.lua) when it did not get
-- the key.
local function register()
  if hands then
    fairRegister(HANDS, id, ARGV[9], ARGV[7], ARGV[8], tonumber(ARGV[5]))
  end
end
if hands then
  local cur = redis.call('GET', key)
  if cur == ARGV[1] then
    -- Handed to the waiter with this attempt's token (its previous registration).
    if redis.call('PTTL', key) < tonumber(ARGV[2]) then
      redis.call('PEXPIRE', key, ARGV[2])
    end
    redis.call('HDEL', HANDS, id)
    return 1
  end
  local seq, token = fairHanded(HANDS, id)
  if seq and seq < tonumber(ARGV[9]) - 1 then
    -- Handed to the waiter with a registration older than this attempt's token: the
    -- waiter did not take it (a majority never named it with that token) and has no
    -- lock with it, so the key is freed for this attempt.
    if cur == token then
      redis.call('DEL', key)
      freed = token
    end
    redis.call('HDEL', HANDS, '@' .. id)
  end
end
-- notFreed tells the head of the queue that the key is free (fairNotify), when this
-- attempt freed a stale hand and did not take the key itself, and returns reply.
local function notFreed(reply)
  if freed then
    fairNotify(key, KEYS[2], KEYS[3], freed)
  end
  return reply
end
local early = fairQueueTold(key, KEYS[2], KEYS[3], KEYS[4], id, ARGV[4], tonumber(ARGV[5]))
if early then
  register()
  return notFreed(early)
end
local value = ARGV[1]
if head ~= '' then
  value = head .. ARGV[1] .. '|'
end
if redis.call('SET', key, value, 'NX', 'PX', ARGV[2]) then
  if hands then
    redis.call('HDEL', HANDS, id) -- the lock holds the key: no hand for this waiter
  end
  return 1
end
if head == '' and redis.call('GET', key) == ARGV[1] then
  if redis.call('PTTL', key) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', key, ARGV[2])
  end
  return 1
end
if id == '' then
  return 0
end
register()
return notFreed(-BEHIND)
