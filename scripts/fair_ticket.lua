-- fair_ticket.lua: draw a place number for a waiter of a fair lock (Options.Fair) on
-- one node, and queue the waiter with it. The client takes the largest answer of a
-- majority as the waiter's ticket and sends that one number to every node with each
-- attempt (fair_acquire.lua), which replaces the number drawn here, so every node
-- orders the waiters alike.
--
-- KEYS[1]  the lock key (whether it is held; it also keeps the call in the key's slot)
-- KEYS[2]  the key's waiter queue (sorted set: waiter id, score = ticket)
-- KEYS[3]  the key's waiter leases
-- KEYS[4]  the key's ticket counter: an integer, raised by every enqueue to the ticket
--          it enqueued, with a TTL of at least ARGV[1]
-- ARGV[1]  how long the counter lives at least, in milliseconds (2 entry leases)
-- ARGV[2]  optional: the waiter's id; with it, ARGV[3] is its entry lease in ms
-- KEYS[5], ARGV[4..6]  optional: the key's hand registrations (see fair_queue.lua) and
--          the waiter's registration: TTL in ms, token and seq (fairRegister), made
--          when the draw queues the waiter or finds it queued (the nodes may then
--          hand it the key)
--
-- Draws v, a number above the counter and above every ticket queued here, and returns
-- it. With a waiter id, the entries whose lease ended are dropped first; then, if
-- others are queued or the key is held, and the waiter is not queued, it is queued
-- behind the others with v, as an attempt would queue it (fairEnqueue), and the reply
-- is −v when others are ahead: there its score is v, and its attempt can wait until it
-- is told that it is the head of a free key. Otherwise the reply is v: a waiter first
-- in line behind the holder (queued), one that would be the head of a free key (not
-- queued) and one queued here already (an earlier draw whose reply was lost, or a copy
-- of this one: its score is another number) attempt at once, and the attempt sets the
-- score. A late or repeated copy only raises the counter and its TTL, and can put a
-- gone waiter's entry back for one lease, as the attempts' copies can (at the head
-- when the key is held and nobody is queued).

-- fairPrune, fairNow and fairEnqueue come from fair_queue.lua, put in front of this file.
local v = redis.call('INCR', KEYS[4])
local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]
if top and tonumber(top) >= v then
  v = tonumber(top) + 1
  redis.call('SET', KEYS[4], v, 'KEEPTTL')
end
if redis.call('PTTL', KEYS[4]) < tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[4], ARGV[1])
end
if not ARGV[2] or ARGV[2] == '' then
  return v
end
local now = fairNow()
fairPrune(KEYS[2], KEYS[3], now)
local function register()
  if HANDS and ARGV[6] then
    fairRegister(HANDS, ARGV[2], ARGV[6], ARGV[4], ARGV[5], tonumber(ARGV[3]))
  end
end
if redis.call('ZSCORE', KEYS[2], ARGV[2]) then
  -- Queued by an earlier draw whose reply was lost: this draw's registration replaces
  -- that draw's (a later seq), so that a hand here names the waiter's latest token.
  register()
  return v
end
local first = redis.call('ZCARD', KEYS[2]) == 0
if first and redis.call('EXISTS', KEYS[1]) == 0 then
  return v
end
-- Others are queued and v is above their tickets, or nobody is but the key is held:
-- the waiter goes behind them, or first in line for the holder's release (which tells
-- the head of the queue). A waiter that drew on an empty queue used to be queued only
-- by its attempt: the holder's Client, whose next Acquire found the queue still
-- empty, took the key again, and the first waiter to attempt went first, whatever its
-- ticket. The first in line still answers v: its attempt tells it that it is the head,
-- which polls at RetryDelay for a holder that dies unannounced (a waiter behind others
-- renews only every third of a lease).
fairEnqueue(KEYS[2], KEYS[3], KEYS[4], ARGV[2], v, tonumber(ARGV[3]), now)
register()
if first then
  return v
end
return -v
