-- fair_queue.lua: the queue work of a fair lock's acquire (Options.Fair) on one node.
-- Not a script of its own: the Go side puts it in front of fair_acquire.lua and of
-- fair_fenced_acquire.lua (after decimal.lua there), which then call fairQueue and take
-- the key only when it returns nil. See fair_acquire.lua for the KEYS and ARGV.
if redis.replicate_commands then
  redis.replicate_commands() -- Redis < 5: TIME below, then writes
end
local BEHIND = 1099511627776 -- 2^40: a waiter's reply is −(BEHIND − entries ahead)

-- fairQueue drops the entries whose lease ended (at most 100 per call), then for a
-- TryAcquire (id "") answers 0 when others are queued; for a waiter it queues id with
-- its ticket (ZADD NX: a waiter keeps its first score), raises its lease to now +
-- lease ms, the ticket counter to the ticket and the TTLs of the three keys to two
-- leases (none of them is ever lowered), and answers −(BEHIND − a) when a > 0 entries
-- are ahead of it. It returns nil when the caller may take the key: a TryAcquire with
-- nobody queued, or the head.
local function fairQueue(queue, leases, counter, id, ticket, lease)
  local clock = redis.call('TIME')
  local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  local dead = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, 100)
  for _, w in ipairs(dead) do
    redis.call('ZREM', queue, w)
    redis.call('ZREM', leases, w)
  end
  if id == '' then
    if redis.call('ZCARD', queue) > 0 then
      return 0 -- others are queued: a TryAcquire does not jump the queue
    end
    return nil
  end
  local ends = redis.call('ZSCORE', leases, id)
  if not ends or tonumber(ends) < now + lease then
    redis.call('ZADD', leases, now + lease, id)
  end
  redis.call('ZADD', queue, 'NX', ticket, id)
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

