-- fair_release.lua: release a fair lock (Options.Fair) on one node, or take a waiter
-- that gives up out of the queue, and announce it so the waiters behind it move up.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the key's waiter queue (see fair_acquire.lua)
-- KEYS[3]  the key's waiter leases
-- KEYS[4]  the key's ticket counter (unused; keeps the KEYS of the fair scripts alike)
-- ARGV[1]  the token the lock was acquired with, or "" when a waiter leaves
-- ARGV[2]  the waiter's id, whose entry is removed ("" for a lock of TryAcquire)
--
-- Returns -1 when another token holds the key (left untouched) and no entry was taken
-- out by a waiter leaving; 0 when nothing was announced; otherwise it deleted the key
-- holding ARGV[1], or removed the head of the queue while the key is free, or (ARGV[1]
-- "") took out the entry of a waiter that leaves, head or not, key held or not, and
-- published ARGV[1] (ARGV[2] when ARGV[1] is "") on redlock:released:<key>, and returns
-- 1 + the clients that heard it. Every entry taken out before its turn is announced, so
-- each waiter behind it counts one fewer ahead and does not miss its turn.
-- Both the token and the id belong to an Acquire that is over, so a late copy cannot
-- touch a later lock's key or a live waiter's entry.
local key, queue, leases = KEYS[1], KEYS[2], KEYS[3]
local token, id = ARGV[1], ARGV[2]
local wasHead, removed = false, false
if id ~= '' then
  wasHead = redis.call('ZRANGE', queue, 0, 0)[1] == id
  removed = redis.call('ZREM', queue, id) == 1
  redis.call('ZREM', leases, id)
end
local cur = redis.call('GET', key)
local msg = token
if token == '' then
  if not removed then
    if cur then
      return -1
    end
    return 0
  end
  msg = id
elseif cur and cur ~= token then
  return -1
elseif cur then
  redis.call('DEL', key)
elseif not (wasHead and removed) then
  return 0
end
local heard = redis.pcall('PUBLISH', 'redlock:released:' .. key, msg)
if type(heard) ~= 'number' then
  heard = 0
end
return 1 + heard
