-- release.lua: delete the lock on one node, but only if this token still holds it.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the token the lock was acquired with
--
-- Returns 1 when the key held ARGV[1] and was deleted, 0 when it was absent or held by
-- another token (that holder's lock is left untouched).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
