-- handoff.lua: pass a lock that this client is releasing straight to the next waiter of
-- the same client, in one step instead of a release and an acquire.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the releasing lock's token
-- ARGV[2]  the token of the lock handed off
-- ARGV[3]  the new lock's time to live in milliseconds
--
-- Returns 1 when the key now holds ARGV[2] with at least ARGV[3] ms to live: it held
-- ARGV[1] (the handoff) or already held ARGV[2]. Returns 0 when the key is absent or
-- another token holds it, which is left untouched.
--
-- A copy of this call can arrive again, late (go-redis re-sends a command after a lost
-- reply; a stalled connection delivers what was queued on it), after the new lock has
-- been extended: where the key already holds ARGV[2] its TTL is only ever raised, never
-- set back to ARGV[3]. An absent key is not taken: a copy that runs after the release of
-- a failed handoff (which deletes both tokens) would put back a key that nobody holds,
-- blocking the node until ARGV[3] ends. A node whose key expired or was lost counts as
-- a no for the new lock, as an acquire refused there would.
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[2] then
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
  end
  return 1
end
if cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
