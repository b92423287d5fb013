-- extend.lua: raise the lock's TTL on one node, but only if this token still holds it.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the token the lock was acquired with
-- ARGV[2]  the new time to live in milliseconds
--
-- Returns 1 when the key holds ARGV[1] and now has at least ARGV[2] ms to live, 0
-- otherwise. It never creates a missing key (a lock that expired on this node stays
-- expired), and never shortens a TTL: a delayed extend with a shorter TTL that lands
-- after a later, longer one must not cut the lock short on a node counted for it.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
