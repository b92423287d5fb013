-- acquire.lua: take the lock on one node, or refresh it if this token already holds it.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the token of this attempt (122 random bits as a UUID string)
-- ARGV[2]  the lock's time to live in milliseconds
--
-- Returns 1 when the key now holds ARGV[1] with a TTL of ARGV[2] ms (newly set, or set
-- already by this same command, e.g. re-sent by a client after a lost reply), 0 when
-- another token holds it.
-- A key of another type raises WRONGTYPE, which the client counts as a failed node.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
