-- fenced_acquire.lua: take the lock on one node with fencing token ARGV[3] (phase 2).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter: a plain integer key, never given a TTL, only raised
-- KEYS[3]  optional: the counter's older name on a node that is not a Cluster; the
--          counter is the larger of the two, and both are raised
-- ARGV[1]  the token of this Acquire call
-- ARGV[2]  the lock's time to live in milliseconds
-- ARGV[3]  the proposed fencing token t (an integer ≥ 1)
--
-- Also used to heal a held lock on a node that lost its key (see Lock.Extend): a node
-- restarted empty gets the key back and its counter raised to t again. A TTL is never
-- shortened.
--
-- Returns 1 when the key now holds ARGV[1] and the counter equals t; 0 when another
-- token holds the key; −c when the proposal is refused because the counter c is above
-- t, or equals t for another token (the client then proposes c + 1).
--
-- Why this keeps fencing tokens strictly increasing across the quorum: after a success
-- here the counter is ≥ t and never falls; a later holder must succeed on at least one
-- node of any earlier holder's majority, where it needs counter < its own t.
local counters = {}
local c = 0
for i = 2, #KEYS do
  counters[i] = tonumber(redis.call('GET', KEYS[i])) or 0
  c = math.max(c, counters[i])
end
local t = tonumber(ARGV[3])
local mine = redis.call('GET', KEYS[1]) == ARGV[1]
if c > t or (c == t and not mine) then
  return -c
end
if mine then
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
elseif not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
for i = 2, #KEYS do
  if counters[i] < t then
    redis.call('SET', KEYS[i], t)
  end
end
return 1
