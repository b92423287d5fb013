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

-- fairQueue and BEHIND come from fair_queue.lua, ownerAdd from fair_owner.lua, both
-- put in front of this file.
local key, id, head = KEYS[1], ARGV[3], ARGV[6] or ''
if head ~= '' and ownerAdd(key, head, ARGV[1], ARGV[2]) then
  return 1
end
local early = fairQueue(KEYS[2], KEYS[3], KEYS[4], id, ARGV[4], tonumber(ARGV[5]))
if early then
  return early
end
local value = ARGV[1]
if head ~= '' then
  value = head .. ARGV[1] .. '|'
end
if redis.call('SET', key, value, 'NX', 'PX', ARGV[2]) then
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
return -BEHIND
