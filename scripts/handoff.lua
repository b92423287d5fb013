-- handoff.lua: pass a lock that this client is releasing straight to the next waiter of
-- the same client, in one step instead of a release and an acquire.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the releasing lock's token
-- ARGV[2]  the token of the lock handed over
-- ARGV[3]  the new lock's time to live in milliseconds
--
-- Returns 1 when the key now holds ARGV[2] with a TTL of ARGV[3] ms: it held ARGV[1]
-- (the hand-over), was absent (as acquire.lua would take it), or already held ARGV[2]
-- (a command re-sent after a lost reply). Returns 0 when another token holds it, which
-- is left untouched.
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] or cur == ARGV[2] or not cur then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
