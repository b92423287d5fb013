-- write.lua: store a value in a fenced Redis resource, unless a newer holder wrote it.
--
-- KEYS[1]  the resource: a hash with fields "value" and "fence"
-- ARGV[1]  the value to store
-- ARGV[2]  the writer's fencing token (Lock.Fence)
--
-- Returns 1 when ARGV[2] is at least the token of the last accepted write, and the
-- value and token were stored; 0 when the write was rejected as stale. The check and the
-- write are one atomic step, which is what makes the fence hold.
local last = tonumber(redis.call('HGET', KEYS[1], 'fence')) or 0
if tonumber(ARGV[2]) < last then
  return 0
end
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'fence', ARGV[2])
return 1
