-- reentrant_fenced_acquire.lua: add a hold of an owner to the lock on one node, with
-- fencing (Options.Fencing). The lease keeps one fencing token, given to every hold.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter: a plain integer key, never given a TTL, only raised
-- KEYS[3]  optional: the counter's older name on a node that is not a Cluster
-- ARGV[1]  the owner's head (see reentrant_acquire.lua)
-- ARGV[2]  the hold's id
-- ARGV[3]  the time to live in milliseconds
-- ARGV[4]  the proposed fencing token t: a decimal integer from 1 to 2^63 − 1
--
-- The key of a fenced lease is the head, "#", the lease's token f and "|", then the
-- holds. Where the owner's lease exists, the hold is added (once) and the reply is f
-- (the proposal is not used); the counters are raised to f if they fell below it.
-- Where the key is absent, the lease starts with f = t exactly as fenced_acquire.lua
-- takes a key: refused with the string "-c" when the counter c is at or above t,
-- otherwise the counters are raised to t. Returns the lease's token (at least 1) as a
-- decimal string, 0 when another owner or a lock without owner holds the key, "-c"
-- for a refused proposal. A TTL is never shortened. An owner's lease taken without
-- fencing has no token to give, which is an error.
--
-- Also used to heal a hold (see Lock.Extend) with the lock's token as t.
local MAX = '9223372036854775807' -- 2^63 − 1: the largest token (Redis integers)

-- less(a, b) and canonical(v, max) come from decimal.lua, put in front of this file.

local head, hold, t = ARGV[1], '|' .. ARGV[2] .. '|', ARGV[4]
if not canonical(t, MAX) or t == '0' then
  error('fencing token "' .. string.sub(t, 1, 40) .. '" is not a decimal integer from 1 to ' .. MAX)
end
local counters = {}
local c = '0'
for i = 2, #KEYS do
  local v = redis.call('GET', KEYS[i]) or '0'
  if not canonical(v, MAX) then
    error('fencing counter ' .. KEYS[i] .. ' holds "' .. string.sub(v, 1, 40) .. '", not a decimal integer from 0 to ' .. MAX)
  end
  counters[i] = v
  if less(c, v) then
    c = v
  end
end
local f = t
local cur = redis.call('GET', KEYS[1])
if cur then
  if string.sub(cur, 1, #head) ~= head then
    return 0
  end
  f = string.match(cur, '^#([0-9]+)|', #head + 1)
  if not f or not canonical(f, MAX) or f == '0' then
    error('the lease of this owner on ' .. KEYS[1] .. ' has no fencing token: it was taken without fencing')
  end
  if not string.find(cur, hold, #head, true) then
    redis.call('APPEND', KEYS[1], ARGV[2] .. '|') -- APPEND keeps the TTL
  end
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
  end
else
  if not less(c, t) then
    return '-' .. c
  end
  redis.call('SET', KEYS[1], head .. '#' .. t .. '|' .. ARGV[2] .. '|', 'PX', ARGV[3])
end
for i = 2, #KEYS do
  if less(counters[i], f) then
    redis.call('SET', KEYS[i], f)
  end
end
return f
