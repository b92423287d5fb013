-- reentrant_extend.lua: raise the TTL of an owner's lock on one node, but only if the
-- node lists this hold (see reentrant_acquire.lua for the key's format).
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner's head
-- ARGV[2]  the hold's id
-- ARGV[3]  the new time to live in milliseconds
-- ARGV[4..] optional: the ids of the owner's other holds that the caller's Client has;
--          the script only looks for them
--
-- Returns 0 unless the key belongs to ARGV[1] and lists ARGV[2]. Otherwise the key
-- now has at least ARGV[3] ms to live, and the reply is 2 when ARGV[4..] were given
-- and every one of them is listed too, else 1. It never creates a key, never adds or
-- removes a hold, and never shortens a TTL, so a late copy changes nothing but a TTL
-- that is still only raised. The TTL is the owner's, shared by all its holds on the
-- node.
local head = ARGV[1]
local cur = redis.call('GET', KEYS[1])
if not cur or string.sub(cur, 1, #head) ~= head
    or not string.find(cur, '|' .. ARGV[2] .. '|', #head, true) then
  return 0
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
if #ARGV < 4 then
  return 1
end
for i = 4, #ARGV do
  if not string.find(cur, '|' .. ARGV[i] .. '|', #head, true) then
    return 1
  end
end
return 2
