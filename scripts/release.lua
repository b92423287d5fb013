-- release.lua: delete the lock on one node, but only if this token still holds it, and
-- announce the release to waiting clients.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the token the lock was acquired with
-- ARGV[2]  (optional) the channel on which to publish ARGV[1] after deleting the key
--
-- Returns 1 when the key held ARGV[1] and was deleted, 0 when it was absent or held by
-- another token (that holder's lock is left untouched). The announcement is best
-- effort: a PUBLISH refused (say, by an ACL without channel rights) does not fail the
-- release.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] then
    redis.pcall('PUBLISH', ARGV[2], ARGV[1])
  end
  return 1
end
return 0
