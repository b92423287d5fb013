-- fence_read.lua: read one node's fencing counter (phase 1 of a fenced acquire).
--
-- KEYS[1]  the lock key (unused; keeps the call routed to the key's slot)
-- KEYS[2]  the fencing counter: a plain integer key without TTL, in KEYS[1]'s slot
-- KEYS[3]  optional: the counter's older name on a node that is not a Cluster
--
-- Returns the counter (the larger of its names) as a decimal string, "0" when it does
-- not exist yet: a Lua number is a double and would lose digits above 2^53. A counter
-- that is not a decimal integer from 0 to 2^63 − 1 without leading zeros is an error,
-- never taken as 0 (a later token could then repeat an earlier one).
local MAX = '9223372036854775807' -- 2^63 − 1: the largest token (Redis integers)

-- less(a, b) and canonical(v, max) come from decimal.lua, put in front of this file.

-- counter returns the counter under name as a canonical decimal string ("0" when
-- absent), or raises an error naming it.
local function counter(name)
  local v = redis.call('GET', name) or '0'
  if canonical(v, MAX) then
    return v
  end
  if #v > 40 then
    v = string.sub(v, 1, 40) .. '...'
  end
  error('fencing counter ' .. name .. ' holds "' .. v .. '", not a decimal integer from 0 to ' .. MAX)
end

local c = '0'
for i = 2, #KEYS do
  local v = counter(KEYS[i])
  if less(c, v) then
    c = v
  end
end
return c
