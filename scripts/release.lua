-- release.lua: delete the lock on one node, but only if this token still holds it, and
-- count the clients waiting to hear of it.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the token the lock was acquired with
-- ARGV[2]  optional: the token of a handoff that failed (see handoff.lua), which may
--          have replaced ARGV[1] on this node and is deleted as well ("" if none)
-- On the key's line node, for a plain lock (Client.lineRelease), also:
-- KEYS[2..4]  the line's order, leases and turn (LineKeys)
-- ARGV[3]     how long the line's head has the key's turn, in milliseconds
-- ARGV[4]     "" (do not announce: the node is a Cluster member), or how many of this
--             node's subscribers to the key's channel to leave out of the count that
--             decides whether to announce ("0": the releasing Client ignores its own
--             announcements, and its own count may be stale)
-- ARGV[5]     the releasing Client's line id
--
-- Returns -1 when another token holds the key (that holder's lock is left untouched);
-- 0 when the key is absent (it expired, its node lost it, or an earlier copy of this
-- same call deleted it: a copy re-sent after a lost reply finds nothing to do);
-- otherwise it deleted the key and returns 1 + the number of clients subscribed to
-- redlock:released:<key> on this node (PUBSUB NUMSUB; 0 if refused, say by an ACL).
-- On the line node it takes the releasing Client out of the line in every case, and
-- after a delete drops lapsed places from the line's front, gives the head the turn ("turn:<id>", only where the turn's
-- key is absent or a turn) and, if a Client other than the releasing one listens,
-- announces the release there: "!<token> <head id>", or "!<token>" with nobody in
-- line. Elsewhere the releasing Client announces it (Client.announce). Both tokens
-- belong to locks that are over, so a late copy of this call cannot touch the key of a
-- later lock: it returns before any write but the releasing Client's place in the
-- line, which its next refused attempt would give back.
local line = ARGV[3] ~= nil and ARGV[3] ~= ''
if line and redis.replicate_commands then
  redis.replicate_commands() -- Redis < 5: TIME below, after a write
end
local cur = redis.call('GET', KEYS[1])
if line then
  -- The releasing Client waits for nothing now, whether or not its key was here (it
  -- may have won without this node).
  redis.pcall('ZREM', KEYS[2], ARGV[5])
  redis.pcall('ZREM', KEYS[3], ARGV[5])
end
if not cur then
  return 0
end
if cur ~= ARGV[1] and cur ~= ARGV[2] then
  return -1
end
redis.call('DEL', KEYS[1])
local subs = redis.pcall('PUBSUB', 'NUMSUB', 'redlock:released:' .. KEYS[1])
if type(subs) ~= 'table' or type(subs[2]) ~= 'number' then
  subs = 0
else
  subs = subs[2]
end
if not line then
  return 1 + subs
end
local turn = redis.pcall('GET', KEYS[4])
local free = turn == false or (type(turn) == 'string' and string.sub(turn, 1, 5) == 'turn:')
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local head = nil
for _ = 1, 8 do
  local first = redis.pcall('ZRANGE', KEYS[2], 0, 0)
  first = type(first) == 'table' and first[1]
  if not first then
    break
  end
  local untilMs = tonumber(redis.pcall('ZSCORE', KEYS[3], first))
  if untilMs and untilMs >= now then
    head = first
    break
  end
  redis.pcall('ZREM', KEYS[2], first)
  redis.pcall('ZREM', KEYS[3], first)
end
if free and head then
  redis.pcall('SET', KEYS[4], 'turn:' .. head, 'PX', ARGV[3])
elseif free and turn then
  redis.pcall('DEL', KEYS[4])
end
if ARGV[4] ~= '' and subs > tonumber(ARGV[4]) then
  local msg = '!' .. ARGV[1]
  if head then
    msg = msg .. ' ' .. head
  end
  redis.call('PUBLISH', 'redlock:released:' .. KEYS[1], msg)
end
return 1 + subs
