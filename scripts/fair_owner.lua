-- fair_owner.lua: the holds of an owner (WithOwner) on a fair lock's key, on one node.
-- Not a script of its own: the Go side puts it after fair_queue.lua, in front of
-- fair_acquire.lua and fair_release.lua. An owner's key holds what
-- reentrant_acquire.lua writes: the owner's head, then every hold's id followed by "|"
-- (owner.go); locks without owner hold a bare token, which no head is a prefix of.

-- ownerAdd adds the hold id to key when the owner's head holds it, raises its TTL to
-- at least ttl ms (never lowers it), and reports whether it did. It never takes a key
-- that is free or held by anyone else: that is the queue's to give. A hold listed
-- already is not listed twice (a copy of the call adds nothing).
local function ownerAdd(key, head, id, ttl)
  local cur = redis.call('GET', key)
  if not cur or string.sub(cur, 1, #head) ~= head then
    return false
  end
  if not string.find(cur, '|' .. id .. '|', #head, true) then
    redis.call('APPEND', key, id .. '|') -- APPEND keeps the TTL
  end
  if redis.call('PTTL', key) < tonumber(ttl) then
    redis.call('PEXPIRE', key, ttl)
  end
  return true
end

-- ownerRemove removes the hold id from cur, key's value, which begins with the owner's
-- head. It returns nil when cur does not list the hold (a copy of a release that came
-- first, or a hold lost), false when it removed it and other holds are left (the
-- expiry kept, as reentrant_release.lua keeps it), true when it was the last and it
-- deleted the key. A fenced lease's token ("#<token>|" after the head) is not a hold.
local function ownerRemove(key, cur, head, id)
  local hold = '|' .. id .. '|'
  local at = string.find(cur, hold, #head, true)
  if not at then
    return nil
  end
  local rest = string.sub(cur, 1, at) .. string.sub(cur, at + #hold)
  local left = string.sub(rest, #head + 1)
  if string.match(left, '^#[0-9]+|') then
    left = string.sub(left, string.find(left, '|', 1, true) + 1)
  end
  if left == '' then
    redis.call('DEL', key)
    return true
  end
  local ttl = redis.call('PTTL', key)
  if ttl == -1 then
    redis.call('SET', key, rest)
  else
    redis.call('SET', key, rest, 'PX', math.max(ttl, 1))
  end
  return false
end
