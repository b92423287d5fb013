-- fair_queue.lua: the queue work of a fair lock (Options.Fair) on one node. Not a
-- script of its own: the Go side puts it in front of fair_acquire.lua and of
-- fair_fenced_acquire.lua (after decimal.lua there), which then call fairQueue and take
-- the key only when it returns nil, of fair_ticket.lua, which queues the waiter with
-- the number it draws (fairEnqueue), and of fair_release.lua, which calls fairNotify. See
-- fair_acquire.lua for the KEYS and ARGV.
if redis.replicate_commands then
  redis.replicate_commands() -- Redis < 5: TIME below, then writes
end
local BEHIND = 1099511627776 -- 2^40: a waiter's reply is −(BEHIND − entries ahead)
-- The key's hand registrations (below), or nil in a script whose KEYS[5] is something
-- else (fair_fenced_acquire.lua sets it to nil: its KEYS[5..] are fencing counters).
local HANDS = KEYS[5]

-- fairPrune drops the entries whose lease ended at now (ms, this node's clock) from
-- the queue and the leases, at most 100 per call.
local function fairPrune(queue, leases, now)
  local dead = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, 100)
  for _, w in ipairs(dead) do
    redis.call('ZREM', queue, w)
    redis.call('ZREM', leases, w)
  end
end

-- fairNow returns this node's clock in milliseconds.
local function fairNow()
  local clock = redis.call('TIME')
  return tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end

-- fairEnqueue queues the waiter id with its ticket (the score becomes the ticket: an
-- attempt's ticket, the one number the waiter's Client sends to every node, replaces
-- the number this node drew for it, and every call of one id sends the same ticket),
-- raises its lease to now + lease ms, the ticket counter to the ticket and the TTLs of
-- the three keys to two leases (none of them is ever lowered), and answers
-- −(BEHIND − a) when a > 0 entries are ahead of it, nil for the head.
local function fairEnqueue(queue, leases, counter, id, ticket, lease, now)
  local ends = redis.call('ZSCORE', leases, id)
  if not ends or tonumber(ends) < now + lease then
    redis.call('ZADD', leases, now + lease, id)
  end
  redis.call('ZADD', queue, ticket, id)
  local c = redis.call('GET', counter)
  if not c or tonumber(c) < tonumber(ticket) then
    redis.call('SET', counter, ticket, 'KEEPTTL')
  end
  for _, k in ipairs({queue, leases, counter}) do
    if redis.call('PTTL', k) < 2 * lease then
      redis.call('PEXPIRE', k, 2 * lease)
    end
  end
  local ahead = redis.call('ZRANK', queue, id)
  if ahead > 0 then
    return -(BEHIND - ahead)
  end
  return nil
end

-- fairQueue drops the entries whose lease ended (fairPrune), then for a TryAcquire
-- (id "") answers 0 when others are queued; for a waiter it queues id with its ticket
-- (fairEnqueue). It returns nil when the caller may take the key: a TryAcquire with
-- nobody queued, or the head.
local function fairQueue(queue, leases, counter, id, ticket, lease)
  if id == '' and redis.call('EXISTS', queue) == 0 then
    return nil -- nobody queued: the usual case of an uncontended key, in one call
  end
  local now = fairNow()
  fairPrune(queue, leases, now)
  if id == '' then
    if redis.call('ZCARD', queue) > 0 then
      return 0 -- others are queued: a TryAcquire does not jump the queue
    end
    return nil
  end
  return fairEnqueue(queue, leases, counter, id, ticket, lease, now)
end

-- The hand registrations of a fair key (HANDS: KEYS[5] of fair_ticket.lua,
-- fair_acquire.lua and fair_release.lua, absent for Clients of earlier versions; only
-- waiters without owner or fencing register): a hash in the key's slot, field <waiter id> = "<seq> <px> <token>", the
-- token with which the waiter's latest call asks to be handed the key when it is the
-- head of the queue and the key is free, the key's TTL for that (px ms) and the call's
-- sequence number, and field "@<waiter id>" = "<seq> <token>", the registration with
-- which the key was handed to it. A registration only replaces one with a lower seq,
-- so a late copy of an earlier call cannot bring back an older token.

-- fairRegister records waiter id's hand registration (seq, px, token) in hash h, unless
-- h holds one of the same or a later seq, and keeps h for two leases at least.
local function fairRegister(h, id, seq, px, token, lease)
  local cur = redis.call('HGET', h, id)
  local handed = redis.call('HGET', h, '@' .. id)
  seq = tonumber(seq)
  for _, r in ipairs({cur, handed}) do
    if r and tonumber(string.match(r, '^(%d+)')) >= seq then
      return
    end
  end
  redis.call('HSET', h, id, seq .. ' ' .. px .. ' ' .. token)
  if redis.call('PTTL', h) < 2 * lease then
    redis.call('PEXPIRE', h, 2 * lease)
  end
end

-- fairHand hands the free key to the queue's head when it has a registration: sets
-- the key to the registered token for the registered TTL, but no longer than the
-- head's entry lease has left (a head that died holds the key no longer than its
-- entry would have held the queue), moves the registration to "@<head>", and returns
-- the token and the TTL set (nil when the head has none). leases: the entries' leases.
local function fairHand(h, key, leases, head, now)
  local r = redis.call('HGET', h, head)
  if not r then
    return nil
  end
  local seq, px, token = string.match(r, '^(%d+) (%d+) (.+)$')
  redis.call('HDEL', h, head)
  local ends = tonumber(redis.call('ZSCORE', leases, head))
  if not ends or not seq then
    return nil
  end
  px = math.min(tonumber(px), ends - now)
  if px <= 0 or not redis.call('SET', key, token, 'NX', 'PX', px) then
    return nil
  end
  redis.call('HSET', h, '@' .. head, seq .. ' ' .. token)
  if redis.call('PTTL', h) < 2 * px then
    -- The HDEL above may have emptied and so deleted the hash, and the HSET made it
    -- again without a TTL: it must not outlive the key it tells about.
    redis.call('PEXPIRE', h, 2 * px)
  end
  return token, px
end

-- fairHanded returns the seq and token with which the key was handed to waiter id
-- (nil when it was not), from hash h.
local function fairHanded(h, id)
  local r = redis.call('HGET', h, '@' .. id)
  if not r then
    return nil
  end
  local seq, token = string.match(r, '^(%d+) (.+)$')
  return tonumber(seq), token
end

-- fairNotify tells the head of the queue that the key is free, after a release or a
-- removal made it so: it drops the entries whose lease ended (so that a dead waiter is
-- not the one told), then publishes "msg id" on the channel of the head's Client,
-- redlock:fair:<client>, the head's id being "<client>:<waiter>": one channel per
-- Client for all its keys, which it subscribes to once. Only the head's Client hears
-- it, not every waiting Client. Heads of earlier versions are told as they listen: an
-- id "<client>/<waiter>" on redlock:fair:<client>:<key>, an id with neither on
-- redlock:released:<key> (msg alone). A head whose id is skip (the waiter whose failed
-- attempt this clean-up undoes) is neither told nor handed the key: it knows. Returns
-- the number of clients that received it (0 with nobody queued or the head skipped, or
-- a PUBLISH refused, say by an ACL without channel rights: the announcement is best
-- effort).
local function fairNotify(key, queue, leases, msg, skip)
  if redis.call('EXISTS', queue) == 0 then
    return 0 -- nobody queued (a lease that ended is pruned where a queue is)
  end
  local now = fairNow()
  fairPrune(queue, leases, now)
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  if not head or head == skip then
    return 0
  end
  if HANDS and redis.call('EXISTS', key) == 0 then
    local token, px = fairHand(HANDS, key, leases, head, now)
    if token then
      msg = '=' .. token .. ' ' .. px
    end
  end
  local heard
  local client = string.match(head, '^([^/:]+):')
  if client then
    heard = redis.pcall('PUBLISH', 'redlock:fair:' .. client, msg .. ' ' .. head)
  else
    client = string.match(head, '^([^/]+)/')
    if client then
      -- The previous version: a channel per Client and key.
      heard = redis.pcall('PUBLISH', 'redlock:fair:' .. client .. ':' .. key, msg .. ' ' .. head)
    else
      -- A waiter of an earlier version (its id names no Client): it listens on the
      -- key's release channel and counts releases there.
      heard = redis.pcall('PUBLISH', 'redlock:released:' .. key, msg)
    end
  end
  if type(heard) ~= 'number' then
    return 0
  end
  return heard
end

-- fairQueueTold is fairQueue for an attempt, which also tells the new head of the queue
-- (fairNotify, the notice of a waiter that leaves, with the caller's id as its token;
-- it hands the key where the head registered a token) when the attempt changed who
-- the head is while the caller stays behind and the key is free: its ticket, which
-- replaces the number this node drew for it, moved it behind another waiter, or the
-- prune took a dead head out. No release is coming to tell that waiter, and the
-- caller's failed attempt does not (TestFairRescoreTellsNewHead,
-- TestFairRescoreAfterPruneTellsNewHead; in TestFairSplitCleanupTellsHead a head
-- refused on 3 nodes behind such an entry waited for RetryDelay).
local function fairQueueTold(key, queue, leases, counter, id, ticket, lease)
  local before = id ~= '' and redis.call('ZRANGE', queue, 0, 0)[1]
  local early = fairQueue(queue, leases, counter, id, ticket, lease)
  if early and before and redis.call('ZRANGE', queue, 0, 0)[1] ~= before
    and redis.call('EXISTS', key) == 0 then
    fairNotify(key, queue, leases, id)
  end
  return early
end
