-- fence_read.lua: read one node's fencing counter (phase 1 of a fenced acquire).
--
-- KEYS[1]  the lock key (unused; keeps the call routed to the key's slot)
-- KEYS[2]  the fencing counter: a plain integer key without TTL, in KEYS[1]'s slot
-- KEYS[3]  optional: the counter's older name on a node that is not a Cluster
--
-- Returns the counter (the larger of its names), 0 when it does not exist yet.
local c = 0
for i = 2, #KEYS do
  c = math.max(c, tonumber(redis.call('GET', KEYS[i])) or 0)
end
return c
