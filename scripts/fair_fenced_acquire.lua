-- fair_fenced_acquire.lua: fair_acquire.lua with a fencing token (Options.Fair with
-- Options.Fencing): queue the waiter on one node and renew its entry as fair_acquire.lua
-- does, and if it is the head (or, for a TryAcquire, nobody is queued) and the key is
-- free, take the key with fencing token t exactly as fenced_acquire.lua does.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the key's waiter queue, KEYS[3] its waiter leases, KEYS[4] its ticket
--          counter (see fair_acquire.lua)
-- KEYS[5]  the fencing counter: a plain integer key, never given a TTL, only raised
-- KEYS[6]  optional: the counter's older name on a node that is not a Cluster; the
--          counter is the larger of the two, and both are raised
-- ARGV[1]  the token of this attempt
-- ARGV[2]  the lock's time to live in milliseconds
-- ARGV[3]  the waiter's id, or "" for a TryAcquire (see fair_acquire.lua)
-- ARGV[4]  the waiter's ticket, ARGV[5] its entry lease in milliseconds
-- ARGV[6]  the proposed fencing token t: a decimal integer from 1 to 2^63 − 1
--
-- Returns what fair_acquire.lua returns (1 took it; 0 a TryAcquire that did not;
-- −(2^40 − a) a waiter that did not, a entries ahead) as integers, and, as a string,
-- "-c" when the waiter is the head, the key free (or held by ARGV[1]) and the
-- proposal refused: the counter c is above t, or equals t for another token. The client
-- tells the two kinds of negative reply apart by their type, and proposes c + 1. On
-- success the key holds ARGV[1] and the counters equal t.
--
-- The counter is checked only where the key would be taken: a waiter behind others, or
-- the head while another token holds the key, is not refused, so waiting costs no
-- proposals. Tokens rise strictly for the reason given in fenced_acquire.lua: the grant
-- needs counter < t (or = t, ours) on a majority, each of which keeps counter ≥ t.
-- A t or counter that is not a canonical decimal integer in range is an error, raised
-- before anything is written. A late copy never lowers a counter or a TTL and never
-- touches a later lock's key (it compares the key's token first); it can put a gone
-- waiter's entry back for one lease, as fair_acquire.lua's copies can. Where its round
-- took the key, the counter is at t already, so a copy that finds the key gone is
-- refused (c = t, and the key is not ours): only a copy reaching a node its round never
-- reached can set a key with a dead token there, for at most its TTL.
local MAX = '9223372036854775807' -- 2^63 − 1: the largest token (Redis integers)

-- less(a, b) and canonical(v, max) come from decimal.lua, fairQueueTold, BEHIND and
-- HANDS from fair_queue.lua, both put in front of this file.

HANDS = nil -- KEYS[5..] are the fencing counters here: no hand-over (fair_queue.lua)
local key, id, t = KEYS[1], ARGV[3], ARGV[6]
if not canonical(t, MAX) or t == '0' then
  error('fencing token "' .. string.sub(t, 1, 40) .. '" is not a decimal integer from 1 to ' .. MAX)
end
local counters = {}
local c = '0'
for i = 5, #KEYS do
  local v = redis.call('GET', KEYS[i]) or '0'
  if not canonical(v, MAX) then
    error('fencing counter ' .. KEYS[i] .. ' holds "' .. string.sub(v, 1, 40) .. '", not a decimal integer from 0 to ' .. MAX)
  end
  counters[i] = v
  if less(c, v) then
    c = v
  end
end
local early = fairQueueTold(key, KEYS[2], KEYS[3], KEYS[4], id, ARGV[4], tonumber(ARGV[5]))
if early then
  return early
end
local cur = redis.call('GET', key)
local mine = cur == ARGV[1]
if cur and not mine then
  if id == '' then
    return 0
  end
  return -BEHIND -- the head: another token holds the key
end
if less(t, c) or (c == t and not mine) then
  return '-' .. c
end
if mine then
  if redis.call('PTTL', key) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', key, ARGV[2])
  end
else
  redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
end
for i = 5, #KEYS do
  if less(counters[i], t) then
    redis.call('SET', KEYS[i], t)
  end
end
return 1
