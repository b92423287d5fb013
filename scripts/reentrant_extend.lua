-- reentrant_extend.lua: raise the TTL of an owner's lock on one node, but only if the
-- node lists this hold (see reentrant_acquire.lua for the key's format).
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner's head
-- ARGV[2]  the hold's id
-- ARGV[3]  the new time to live in milliseconds
--
-- Returns 1 when the key belongs to ARGV[1], lists ARGV[2] and now has at least ARGV[3]
-- ms to live, 0 otherwise. It never creates a key or a hold, and never shortens a TTL.
-- The TTL is the owner's, shared by all its holds on the node.
local head = ARGV[1]
local cur = redis.call('GET', KEYS[1])
if not cur or string.sub(cur, 1, #head) ~= head
    or not string.find(cur, '|' .. ARGV[2] .. '|', #head, true) then
  return 0
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
