-- line_renew.lua: lengthen a waiting Client's lease on its place in a key's line, on
-- the key's line node, when its waiter is about to wait longer than its place would
-- last (line.go). A Client not in the line is left out: this call never adds a place.
--
-- KEYS[1..2]  the line's order and leases (LineKeys)
-- ARGV[1]     the Client's line id
-- ARGV[2]     the lease, in milliseconds
--
-- Returns 1 if the Client has a place, else 0. It never shortens a lease or the line's
-- life, and a key of another type by these names is left alone: a late copy can at
-- most keep a place a little longer.
if redis.replicate_commands then
  redis.replicate_commands() -- Redis < 5: TIME below, then writes
end
if redis.call('TYPE', KEYS[1]).ok ~= 'zset' or not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
local clock = redis.call('TIME')
local lease = tonumber(ARGV[2])
local untilMs = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000) + lease
local old = redis.pcall('ZSCORE', KEYS[2], ARGV[1])
if type(old) ~= 'string' or tonumber(old) < untilMs then
  redis.pcall('ZADD', KEYS[2], untilMs, ARGV[1])
end
for i = 1, 2 do
  if redis.call('TYPE', KEYS[i]).ok == 'zset' and redis.call('PTTL', KEYS[i]) < lease then
    redis.call('PEXPIRE', KEYS[i], lease)
  end
end
return 1
