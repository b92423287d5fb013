-- write.lua: store a value in a fenced Redis resource, unless a newer holder wrote it.
--
-- KEYS[1]  the resource: a hash with fields "value" and "fence" (and "update_id" once an
--          Update has written)
-- ARGV[1]  the value to store
-- ARGV[2]  the writer's fencing token (Lock.Fence): a decimal integer, 1 to 2^64 − 1
-- ARGV[3]  optional, for Update: "1" if the value was present when it was read, else "0"
-- ARGV[4]  with ARGV[3]: the value read ("" when absent)
-- ARGV[5]  with ARGV[3]: the fence field read ("" when absent)
-- ARGV[6]  with ARGV[3]: a random id of this Update attempt, stored in the field
--          "update_id" with the value, so that a copy of this call sent again (go-redis
--          retries a call whose reply was lost) learns that the write was applied
--          already instead of finding the hash changed (and Update applying fn twice)
--
-- Returns {code, fence}, fence being the stored fence field as it was before this call
-- ("0" when absent):
--    1  ARGV[2] is at least the stored fence: the value and token were stored (or,
--       with ARGV[6], this very attempt had stored them already: nothing changed);
--    0  rejected as stale (ARGV[2] is below the stored fence), nothing changed;
--    2  (with ARGV[3]) not stale, but the hash is no longer what was read: nothing
--       changed;
--   -1  the stored fence field is not a decimal integer from 0 to 2^64 − 1, or ARGV[2]
--       is not one from 1 to 2^64 − 1; nothing changed.
-- The check and the write are one atomic step, which is what makes the fence hold.
--
-- Tokens are compared exactly, as decimal strings: Lua's numbers are doubles, which
-- cannot tell 2^53 from 2^53 + 1.
local MAX = '18446744073709551615' -- 2^64 − 1

-- canonical reports whether s is a decimal integer from 0 to MAX without leading zeros.
local function canonical(s)
  if s == '0' then
    return true
  end
  if #s > #MAX or not string.find(s, '^[1-9][0-9]*$') then
    return false
  end
  if #s < #MAX then
    return true
  end
  for i = 1, #s do -- equal lengths: the first differing digit decides
    local a, b = string.byte(s, i), string.byte(MAX, i)
    if a ~= b then
      return a < b
    end
  end
  return true
end

-- less reports a < b for canonical decimal strings: the shorter is smaller, and at
-- equal lengths the first differing digit decides (byte values, not the locale).
local function less(a, b)
  if #a ~= #b then
    return #a < #b
  end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return false
end

local stored = redis.call('HGET', KEYS[1], 'fence')
local last = stored or '0'
if not canonical(last) or not canonical(ARGV[2]) or ARGV[2] == '0' then
  return {-1, last}
end
if ARGV[6] and redis.call('HGET', KEYS[1], 'update_id') == ARGV[6] then
  return {1, last} -- a copy of an attempt that was applied: apply it once
end
if less(ARGV[2], last) then
  return {0, last}
end
if ARGV[3] then
  local value = redis.call('HGET', KEYS[1], 'value')
  local present = value and '1' or '0'
  if present ~= ARGV[3] or (value and value ~= ARGV[4]) or (stored or '') ~= ARGV[5] then
    return {2, last}
  end
end
if ARGV[6] then
  redis.call('HSET', KEYS[1], 'value', ARGV[1], 'fence', ARGV[2], 'update_id', ARGV[6])
else
  redis.call('HSET', KEYS[1], 'value', ARGV[1], 'fence', ARGV[2])
end
return {1, last}
