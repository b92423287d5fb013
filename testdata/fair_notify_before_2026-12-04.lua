-- The lines of fairNotify (scripts/fair_queue.lua) before 2026-12-04 that chose the
-- channel: ids "<client>/<waiter>", a channel per Client and key. The test
-- TestFairPreviousVersionReleaseBounded puts them in place of today's.
  local client = string.match(head, '^([^/]+)/')
  local heard
  if client then
    heard = redis.pcall('PUBLISH', 'redlock:fair:' .. client .. ':' .. key, msg .. ' ' .. head)
  else
    -- A waiter of an earlier version (its id names no Client, as during a rolling
    -- upgrade): it listens on the key's release channel and counts releases there.
    heard = redis.pcall('PUBLISH', 'redlock:released:' .. key, msg)
  end
