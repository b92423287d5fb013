-- fenced_acquire.lua: take the lock on one node with fencing token ARGV[3] (phase 2).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter: a plain integer key, never given a TTL, only raised
-- KEYS[3]  optional: the counter's older name on a node that is not a Cluster; the
--          counter is the larger of the two, and both are raised
-- ARGV[1]  the token of this Acquire call
-- ARGV[2]  the lock's time to live in milliseconds
-- ARGV[3]  the proposed fencing token t: a decimal integer from 1 to 2^63 − 1
--
-- Also used to heal a held lock on a node that lost its key (see Lock.Extend): a node
-- restarted empty gets the key back and its counter raised to t again. A TTL is never
-- shortened.
--
-- Returns 1 when the key now holds ARGV[1] and the counter equals t; 0 when another
-- token holds the key; the string "-c" when the proposal is refused because the
-- counter c is above t, or equals t for another token (the client then proposes
-- c + 1). Counters are compared and written as decimal strings, never as Lua numbers
-- (doubles, which cannot tell 2^53 from 2^53 + 1), and returned as a string for the
-- same reason. A counter or a t that is not a decimal integer in range (0 to 2^63 − 1,
-- t at least 1, no leading zeros) is an error, and nothing is changed.
--
-- Why this keeps fencing tokens strictly increasing across the quorum: after a success
-- here the counter is ≥ t and never falls; a later holder must succeed on at least one
-- node of any earlier holder's majority, where it needs counter < its own t.
local MAX = '9223372036854775807' -- 2^63 − 1: the largest token (Redis integers)

-- less(a, b) and canonical(v, max) come from decimal.lua, put in front of this file.

-- quote returns v in quotes, cut to a length fit for an error message.
local function quote(v)
  if #v > 40 then
    v = string.sub(v, 1, 40) .. '...'
  end
  return '"' .. v .. '"'
end

local t = ARGV[3]
if not canonical(t, MAX) or t == '0' then
  error('fencing token ' .. quote(t) .. ' is not a decimal integer from 1 to ' .. MAX)
end
local counters = {}
local c = '0'
for i = 2, #KEYS do
  local v = redis.call('GET', KEYS[i]) or '0'
  if not canonical(v, MAX) then
    error('fencing counter ' .. KEYS[i] .. ' holds ' .. quote(v) .. ', not a decimal integer from 0 to ' .. MAX)
  end
  counters[i] = v
  if less(c, v) then
    c = v
  end
end
local mine = redis.call('GET', KEYS[1]) == ARGV[1]
if less(t, c) or (c == t and not mine) then
  return '-' .. c
end
if mine then
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
elseif not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
for i = 2, #KEYS do
  if less(counters[i], t) then
    redis.call('SET', KEYS[i], t)
  end
end
return 1
