-- decimal.lua: exact comparison of fencing tokens and counters written as decimal
-- strings. Not a script of its own: the Go side puts it in front of fence_read.lua and
-- fenced_acquire.lua (Redis runs every script as one self-contained chunk). A Lua number
-- is a double and cannot tell 2^53 from 2^53 + 1, so the scripts never convert tokens.

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

-- canonical reports whether v is a decimal integer from 0 to max (itself canonical)
-- without leading zeros.
local function canonical(v, max)
  return v == '0' or (string.find(v, '^[1-9][0-9]*$') ~= nil and not less(max, v))
end

