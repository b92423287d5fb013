-- reentrant_acquire.lua: add a hold of an owner to the lock on one node (see owner.go).
-- Also used to heal a hold on a node that lost it (see Lock.Extend).
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner's head: "owner <length>:<owner>|", a prefix no other owner's head
--          and no token of a lock without owner starts with
-- ARGV[2]  the hold's id (122 random bits as a UUID string; one per Acquire)
-- ARGV[3]  the time to live in milliseconds
--
-- The key of an owner's lock is a string: the head, then every hold id followed by "|".
-- Locks without owner hold a bare token there, so their scripts see this key as held by
-- another token, and these scripts see theirs as held by another owner.
--
-- Returns 1 when the key now belongs to ARGV[1], lists ARGV[2] and has at least ARGV[3]
-- ms to live (newly set, a hold added to the owner's lock, or the hold listed already:
-- a copy re-sent after a lost reply adds nothing twice), 0 when another owner or a lock
-- without owner holds it. A TTL is never shortened.
local head, hold = ARGV[1], '|' .. ARGV[2] .. '|'
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], head .. ARGV[2] .. '|', 'PX', ARGV[3])
  return 1
end
if string.sub(cur, 1, #head) ~= head then
  return 0
end
if not string.find(cur, hold, #head, true) then
  redis.call('APPEND', KEYS[1], ARGV[2] .. '|') -- APPEND keeps the TTL
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
