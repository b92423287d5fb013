-- line_leave.lua: take a Client out of a key's line on its line node, because its
-- Acquire stopped waiting, and end the Client's turn if it has one (line.go).
--
-- KEYS[1..3]  the line's order, leases and turn (LineKeys)
-- ARGV[1]     the Client's line id
--
-- Returns 1. It writes only the line's own keys, and only the Client's own place and
-- turn: a late copy can at most take the Client's later place away, which its next
-- refused attempt gives back.
redis.pcall('ZREM', KEYS[1], ARGV[1])
redis.pcall('ZREM', KEYS[2], ARGV[1])
if redis.pcall('GET', KEYS[3]) == 'turn:' .. ARGV[1] then
  redis.call('DEL', KEYS[3])
end
return 1
