-- fair_release.lua: release a fair lock (Options.Fair) on one node, or take a waiter
-- that gives up out of the queue, and wake the waiters when the key is free.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the key's waiter queue (see fair_acquire.lua)
-- KEYS[3]  the key's waiter leases
-- KEYS[4]  the key's ticket counter (unused; keeps the KEYS of the fair scripts alike)
-- ARGV[1]  the token the lock was acquired with, or "" when a waiter leaves
-- ARGV[2]  the waiter's id, whose entry is removed ("" for a lock of TryAcquire)
--
-- Returns -1 when another token holds the key (left untouched); 0 when the key is
-- absent and nothing was announced; otherwise it deleted the key holding ARGV[1], or
-- removed the head of the queue while the key is free, published ARGV[1] (ARGV[2] when
-- ARGV[1] is "") on redlock:released:<key>, and returns 1 + the clients that heard it.
-- Both the token and the id belong to an Acquire that is over, so a late copy cannot
-- touch a later lock's key or a live waiter's entry.
local key, queue, leases = KEYS[1], KEYS[2], KEYS[3]
local token, id = ARGV[1], ARGV[2]
local wasHead = false
if id ~= '' then
  wasHead = redis.call('ZRANGE', queue, 0, 0)[1] == id
  if redis.call('ZREM', queue, id) == 0 then
    wasHead = false
  end
  redis.call('ZREM', leases, id)
end
local cur = redis.call('GET', key)
if cur and (token == '' or cur ~= token) then
  return -1
end
if cur then
  redis.call('DEL', key)
elseif not wasHead then
  return 0
end
local msg = token
if msg == '' then
  msg = id
end
local heard = redis.pcall('PUBLISH', 'redlock:released:' .. key, msg)
if type(heard) ~= 'number' then
  heard = 0
end
return 1 + heard
