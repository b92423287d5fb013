-- fair_ticket.lua: draw a place number for a waiter of a fair lock (Options.Fair) on
-- one node. The client takes the largest answer of a majority as the waiter's ticket
-- and sends that one number to every node (fair_acquire.lua), so every node orders the
-- waiters alike.
--
-- KEYS[1]  the lock key (unused; keeps the call in the key's slot)
-- KEYS[2]  the key's waiter queue (sorted set: waiter id, score = ticket)
-- KEYS[3]  the key's waiter leases (unused here)
-- KEYS[4]  the key's ticket counter: an integer, raised by every enqueue to the ticket
--          it enqueued, with a TTL of at least ARGV[1]
-- ARGV[1]  how long the counter lives at least, in milliseconds (2 entry leases)
--
-- Returns a number above the counter and above every ticket queued here. A late or
-- repeated copy only raises the counter and its TTL.
local v = redis.call('INCR', KEYS[4])
local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]
if top and tonumber(top) >= v then
  v = tonumber(top) + 1
  redis.call('SET', KEYS[4], v, 'KEEPTTL')
end
if redis.call('PTTL', KEYS[4]) < tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[4], ARGV[1])
end
return v
