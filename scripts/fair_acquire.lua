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
--
-- Entries whose lease ended are dropped first: a dead waiter blocks the queue for at
-- most one lease after its last renewal. Returns 1 when the key now holds ARGV[1] (newly
-- set, or by this same token); for a waiter that did not get it, −(2^40 − a), where a
-- is the number of entries ahead of it (0: it is the head and another token holds the
-- key), so that the client learns the fewest ahead on any node from the largest
-- absolute value; 0 for a TryAcquire that did not get it. A lease, a TTL or the
-- counter is only ever raised. A late copy of a finished Acquire's call puts its entry
-- back for at most one lease, and can set the key with a dead token for at most its
-- TTL, as acquire.lua's copies can.
if redis.replicate_commands then
  redis.replicate_commands() -- Redis < 5: TIME below, then writes
end
local BEHIND = 1099511627776 -- 2^40: a waiter's reply is −(BEHIND − entries ahead)
local key, queue, leases, counter = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id = ARGV[3]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, 100)
for _, w in ipairs(dead) do
  redis.call('ZREM', queue, w)
  redis.call('ZREM', leases, w)
end
if id == '' then
  if redis.call('ZCARD', queue) > 0 then
    return 0 -- others are queued: a TryAcquire does not jump the queue
  end
else
  local lease = tonumber(ARGV[5])
  local ends = redis.call('ZSCORE', leases, id)
  if not ends or tonumber(ends) < now + lease then
    redis.call('ZADD', leases, now + lease, id)
  end
  redis.call('ZADD', queue, 'NX', ARGV[4], id)
  local c = redis.call('GET', counter)
  if not c or tonumber(c) < tonumber(ARGV[4]) then
    redis.call('SET', counter, ARGV[4], 'KEEPTTL')
  end
  for _, k in ipairs({queue, leases, counter}) do
    if redis.call('PTTL', k) < 2 * lease then
      redis.call('PEXPIRE', k, 2 * lease)
    end
  end
  local ahead = redis.call('ZRANK', queue, id)
  if ahead > 0 then
    return -(BEHIND - ahead)
  end
end
if redis.call('SET', key, ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
if redis.call('GET', key) == ARGV[1] then
  if redis.call('PTTL', key) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', key, ARGV[2])
  end
  return 1
end
if id == '' then
  return 0
end
return -BEHIND
