-- acquire.lua: take the lock on one node, or refresh it if this token already holds it.
-- Also used to heal a held lock on a node that lost its key (see Lock.Extend).
--
-- KEYS[1]  the lock key
-- ARGV[1]  the token of this attempt (122 random bits as a UUID string)
-- ARGV[2]  the lock's time to live in milliseconds
-- ARGV[3]  optional: the token whose release was announced ("" if none), for an
--          attempt that follows that announcement
-- On the key's line node, for an Acquire's attempt (line.go), also:
-- KEYS[2..4]  the line's order, leases and turn (LineKeys)
-- ARGV[4]     the Client's line id
-- ARGV[5]     the lease of its place in the line, in milliseconds
--
-- Returns 1 when the key now holds ARGV[1] with at least ARGV[2] ms to live (newly set,
-- or set already by this same token: a command re-sent after a lost reply, or a heal
-- that found the key still there), 0 when another token holds it, 2 when that token
-- is ARGV[3], or the key is an owner's (reentrant_acquire.lua) that lists the hold
-- ARGV[3] (the release announced has not reached this node yet: the attempt did not
-- lose to another one here), 3 when the key is free but it is another Client's turn (a release
-- named the head of the line: line.go). A refused Acquire takes a place at the back of
-- the line, or renews its lease there. A TTL is never shortened. A key of another type
-- raises WRONGTYPE, which the client counts as a failed node. Only the SET NX and the
-- PEXPIRE of our own key write the lock key, so a late copy of the call changes no
-- other token's key; the line's writes are the Client's own place, and never shorten
-- a lease or the line's life (the line's keys go with pcall: a name taken by another
-- type only costs the line).
local line = ARGV[4] ~= nil and ARGV[4] ~= ''
if line and redis.replicate_commands then
  redis.replicate_commands() -- Redis < 5: TIME below, then writes
end

-- join puts the Client at the back of the line, or renews its lease there.
local function join()
  local clock = redis.call('TIME')
  local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  local lease = tonumber(ARGV[5])
  redis.pcall('ZADD', KEYS[2], 'NX', tonumber(clock[1]) * 1000000 + tonumber(clock[2]), ARGV[4])
  local old = redis.pcall('ZSCORE', KEYS[3], ARGV[4])
  if type(old) ~= 'string' or tonumber(old) < now + lease then
    redis.pcall('ZADD', KEYS[3], now + lease, ARGV[4])
  end
  for i = 2, 3 do
    if redis.call('TYPE', KEYS[i]).ok == 'zset' and redis.call('PTTL', KEYS[i]) < lease then
      redis.call('PEXPIRE', KEYS[i], lease)
    end
  end
end

if line then
  local turn = redis.pcall('GET', KEYS[4])
  if type(turn) == 'string' and string.sub(turn, 1, 5) == 'turn:' and string.sub(turn, 6) ~= ARGV[4]
      and redis.call('EXISTS', KEYS[1]) == 0 then
    join()
    return 3
  end
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return 1
end
if line then
  join()
end
-- The announced release's lock is still here: its token, or, for an owner's last hold
-- (announced by its hold id), an owner's key that lists that hold.
if ARGV[3] and ARGV[3] ~= '' and (cur == ARGV[3] or string.find(cur, '|' .. ARGV[3] .. '|', 1, true)) then
  return 2
end
return 0
