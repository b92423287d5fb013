-- extend.lua: reset the lock's TTL on one node, but only if this token still holds it.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the token the lock was acquired with
-- ARGV[2]  the new time to live in milliseconds
--
-- Returns 1 when the key held ARGV[1] and its TTL was set to ARGV[2] ms, 0 otherwise.
-- It never creates a missing key: a lock that expired on this node stays expired.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
