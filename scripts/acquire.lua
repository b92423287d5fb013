-- acquire.lua: take the lock on one node, or refresh it if this token already holds it.
-- Also used to heal a held lock on a node that lost its key (see Lock.Extend).
--
-- KEYS[1]  the lock key
-- ARGV[1]  the token of this attempt (122 random bits as a UUID string)
-- ARGV[2]  the lock's time to live in milliseconds
-- ARGV[3]  optional: the token whose release a majority of nodes announced, for an
--          attempt that asks the key's lead node first
--
-- Returns 1 when the key now holds ARGV[1] with at least ARGV[2] ms to live (newly set,
-- or set already by this same token: a command re-sent after a lost reply, or a heal
-- that found the key still there), 0 when another token holds it, 2 when that token
-- is ARGV[3] (its release has not reached this node yet: the attempt did not lose to
-- another one here). A TTL is never shortened. A key of another type raises WRONGTYPE,
-- which the client counts as a failed node. Only the SET NX and the PEXPIRE of our own
-- key write, so a late copy of the call changes no other token's key.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return 1
end
if cur == ARGV[3] then
  return 2
end
return 0
