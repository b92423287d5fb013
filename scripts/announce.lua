-- announce.lua: a releasing Client's announcement on the key's line node (line.go):
-- PUBLISH "!<token>" on the key's release channel, followed by " <head id>" when a
-- release gave the head of the key's line the turn.
--
-- KEYS[1]  the line's turn (LineKeys)
-- ARGV[1]  the key's release channel
-- ARGV[2]  the released token
--
-- Returns the number of clients that received the message. It writes nothing.
local msg = '!' .. ARGV[2]
local turn = redis.pcall('GET', KEYS[1])
if type(turn) == 'string' and string.sub(turn, 1, 5) == 'turn:' then
  msg = msg .. ' ' .. string.sub(turn, 6)
end
return redis.call('PUBLISH', ARGV[1], msg)
