-- fair_release.lua: release a fair lock (Options.Fair) on one node, or take a waiter
-- that gives up out of the queue, and tell the waiter now at the head that the key is
-- free.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the key's waiter queue (see fair_acquire.lua)
-- KEYS[3]  the key's waiter leases
-- KEYS[4]  the key's ticket counter (unused; keeps the KEYS of the fair scripts alike)
-- KEYS[5]  optional: the key's hand registrations (fair_queue.lua); the waiter's go,
--          and a key handed to it with a token other than ARGV[1] is freed (a waiter
--          that leaves never took it; a lock took the key with ARGV[1]); a free key
--          is handed to the next head that has a registration (fairNotify)
-- ARGV[1]  the token the lock was acquired with, or "" when a waiter leaves
-- ARGV[2]  the waiter's id, whose entry is removed ("" for a lock of TryAcquire)
-- ARGV[3]  the owner's head for a hold of an owner (WithOwner), whose id is then
--          ARGV[1]; "" (or absent) for a lock without owner. The hold is removed
--          (ownerRemove, from fair_owner.lua); the key goes, and the head is told,
--          only with the owner's last hold. A key of the owner that does not list the
--          hold is left alone and answers 0 (nothing of ours), as
--          reentrant_release.lua does
-- ARGV[4]  optional: for the clean-up of a waiter's failed attempt (ARGV[1] its token,
--          ARGV[2] ""), the waiter's id: when the key is freed and that waiter is the
--          head, nobody is told (it knows its attempt failed; told, it would attempt
--          again at once while another lock may hold the key on a majority)
--
-- Returns -1 when another token holds the key (left untouched) and no entry was taken
-- out by a waiter leaving; 0 when nothing changed; otherwise it deleted the key holding
-- ARGV[1], or removed an entry (with ARGV[1] "": a waiter that leaves, head or not;
-- else the lock's own entry, when the key was gone already), and returns 1 + the
-- clients that heard the notice: when the key is free afterwards, the head of the
-- queue is told on its Client's channel (fairNotify, from fair_queue.lua, put in front
-- of this file), with ARGV[1] (ARGV[2] when ARGV[1] is "") as the notice's token; so
-- is it when the head left while the key is held (see below).
-- Both the token and the id belong to an Acquire that is over, so a late copy cannot
-- touch a later lock's key or a live waiter's entry; a late copy that removed nothing
-- tells nobody.
local key, queue, leases = KEYS[1], KEYS[2], KEYS[3]
local token, id, head = ARGV[1], ARGV[2], ARGV[3] or ''
local wasHead, removed = false, false
if id ~= '' then
  wasHead = redis.call('ZRANGE', queue, 0, 0)[1] == id
  removed = redis.call('ZREM', queue, id) == 1
  redis.call('ZREM', leases, id)
end
local cur = redis.call('GET', key)
if id ~= '' and HANDS then
  -- The waiter's hand registrations go. A waiter that leaves frees a key handed to it
  -- (it never took it: it leaves without a lock), so the next head is told.
  local _, handed = fairHanded(HANDS, id)
  redis.call('HDEL', HANDS, id, '@' .. id)
  if head == '' and handed and cur == handed and cur ~= token then
    -- Handed to the waiter with a registration it did not take the lock with: its
    -- attempt won with an earlier token elsewhere, or it leaves without a lock.
    redis.call('DEL', key)
    cur = nil
    removed = true
  end
end
local msg = token
if token == '' then
  if not removed then
    if cur then
      return -1
    end
    return 0
  end
  msg = id
elseif head ~= '' then
  if cur and string.sub(cur, 1, #head) ~= head then
    return -1
  end
  local last = nil -- stays nil when the key or the hold is not there
  if cur then
    last = ownerRemove(key, cur, head, token)
  end
  if last == nil and not removed then
    return 0
  end
  if last then
    cur = nil
  end
elseif cur and cur ~= token then
  return -1
elseif cur then
  redis.call('DEL', key)
  cur = nil
elseif not removed then
  return 0
end
-- A waiter that left while the key is held tells nobody: the holder's release tells
-- the next head. But if it was the head, the new head is told now too: it had an entry
-- ahead at its latest attempt, so it would renew only every FairLease/3, and a holder
-- whose key expires (it died) announces nothing. Told, it attempts once, finds itself
-- the head and polls the key at RetryDelay, as a head does.
if cur and not (wasHead and removed) then
  return 1
end
return 1 + fairNotify(key, queue, leases, msg, ARGV[4])
