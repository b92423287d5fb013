-- reentrant_release.lua: remove one hold from an owner's lock on one node; the key goes
-- when no hold is left, counted as release.lua does. A fenced lease's
-- token ("#<token>|" after the head, see reentrant_fenced_acquire.lua) is not a hold.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner's head
-- ARGV[2]  the hold's id
--
-- Returns -1 when another owner, or a lock without owner, holds the key (left
-- untouched); 0 when the key is absent or does not list this hold (nothing of ours:
-- also a copy of this call re-sent after the first one removed the hold); -2 when it
-- removed the hold and others remain (their TTL unchanged: the key stays, and this
-- answer cannot be read as a delete heard by nobody, 1); otherwise it deleted the
-- key and returns 1 + the number of clients subscribed to redlock:released:<key> on
-- this node, as release.lua does (the releasing Client then announces ARGV[2] there).
-- A copy arriving late removes only its own hold, which belongs to a lock that is
-- over: never another hold, never another owner's key.
local head, hold = ARGV[1], '|' .. ARGV[2] .. '|'
local cur = redis.call('GET', KEYS[1])
if not cur then
  return 0
end
if string.sub(cur, 1, #head) ~= head then
  return -1
end
local at = string.find(cur, hold, #head, true)
if not at then
  return 0
end
local rest = string.sub(cur, 1, at) .. string.sub(cur, at + #hold)
local left = string.sub(rest, #head + 1) -- the holds left, after a fenced lease's "#f|"
if string.match(left, '^#[0-9]+|') then
  left = string.sub(left, string.find(left, '|', 1, true) + 1)
end
if left ~= '' then
  -- Keep the expiry: inside a script the clock stands still on Redis 7, so PX PTTL
  -- sets the same instant (older servers can only move it later, never earlier). In
  -- the lease's last millisecond PTTL reads 0 (the key lives while now equals its
  -- expiry) and PX 0 is an error: 1 ms more there shortens nothing. A key without
  -- expiry (-1; these scripts never make one) keeps none.
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl == -1 then
    redis.call('SET', KEYS[1], rest)
  else
    redis.call('SET', KEYS[1], rest, 'PX', math.max(ttl, 1))
  end
  return -2
end
redis.call('DEL', KEYS[1])
local subs = redis.pcall('PUBSUB', 'NUMSUB', 'redlock:released:' .. KEYS[1])
if type(subs) ~= 'table' or type(subs[2]) ~= 'number' then
  return 1
end
return 1 + subs[2]
