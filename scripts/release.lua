-- release.lua: delete the lock on one node, but only if this token still holds it, and
-- announce the release to waiting clients.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the token the lock was acquired with
-- ARGV[2]  (optional) the channel on which to publish ARGV[1] after deleting the key
--
-- Returns 0 when the key was absent or held by another token (that holder's lock is
-- left untouched); otherwise it deleted the key and returns 1 + the number of clients
-- that received the announcement. The announcement is best effort: a PUBLISH refused
-- (say, by an ACL without channel rights) does not fail the release.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
local heard = 0
if ARGV[2] then
  local n = redis.pcall('PUBLISH', ARGV[2], ARGV[1])
  if type(n) == 'number' then
    heard = n
  end
end
return 1 + heard
