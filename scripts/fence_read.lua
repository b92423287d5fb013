-- fence_read.lua: read one node's fencing counter (phase 1 of a fenced acquire).
--
-- KEYS[1]  the lock key (unused; keeps the call routed to the key's slot)
-- KEYS[2]  the fencing counter: a plain integer key without TTL
--
-- Returns the counter, 0 when it does not exist yet.
return tonumber(redis.call('GET', KEYS[2])) or 0
