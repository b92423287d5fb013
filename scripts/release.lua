-- release.lua: delete the lock on one node, but only if this token still holds it, and
-- count the clients waiting to hear of it.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the token the lock was acquired with
-- ARGV[2]  optional: the token of a handoff that failed (see handoff.lua), which may
--          have replaced ARGV[1] on this node and is deleted as well
--
-- Returns -1 when another token holds the key (that holder's lock is left untouched);
-- 0 when the key is absent (it expired, its node lost it, or an earlier copy of this
-- same call deleted it: a copy re-sent after a lost reply finds nothing to do);
-- otherwise it deleted the key and returns 1 + the number of clients subscribed to
-- redlock:released:<key> on this node (PUBSUB NUMSUB; 0 if refused, say by an ACL).
-- The releasing Client announces the release once, after a majority deleted the key
-- (Client.announce): a node does not, so that each waiting Client hears one notice per
-- release instead of one per node. Both tokens belong to locks that are over, so a
-- late copy of this call cannot touch the key of a later lock.
local cur = redis.call('GET', KEYS[1])
if not cur then
  return 0
end
if cur ~= ARGV[1] and cur ~= ARGV[2] then
  return -1
end
redis.call('DEL', KEYS[1])
local subs = redis.pcall('PUBSUB', 'NUMSUB', 'redlock:released:' .. KEYS[1])
if type(subs) ~= 'table' or type(subs[2]) ~= 'number' then
  return 1
end
return 1 + subs[2]
