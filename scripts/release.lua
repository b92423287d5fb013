-- release.lua: delete the lock on one node, but only if this token still holds it, and
-- announce the release to waiting clients on the channel redlock:released:<key>.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the token the lock was acquired with
-- ARGV[2]  optional: the token of a handoff that failed (see handoff.lua), which may
--          have replaced ARGV[1] on this node and is deleted as well
--
-- Returns -1 when another token holds the key (that holder's lock is left untouched);
-- 0 when the key is absent (it expired, its node lost it, or an earlier copy of this
-- same call deleted it: a copy re-sent after a lost reply finds nothing to do);
-- otherwise it deleted the key, published ARGV[1] (now a dead token) on the channel, and
-- returns 1 + the number of clients that received it. The announcement is best effort:
-- a PUBLISH refused (say, by an ACL without channel rights) does not fail the release.
-- Both tokens belong to locks that are over, so a late copy of this call cannot touch
-- the key of a later lock.
local cur = redis.call('GET', KEYS[1])
if not cur then
  return 0
end
if cur ~= ARGV[1] and cur ~= ARGV[2] then
  return -1
end
redis.call('DEL', KEYS[1])
local heard = redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], ARGV[1])
if type(heard) ~= 'number' then
  heard = 0
end
return 1 + heard
