#!lua name=shardtail_sink

-- The Redis side of shardtail's Redis sink (package redissink). Every write
-- of the sink goes through shardtail_apply, so the rules below hold for
-- every key whatever the client does: a row is a hash {v = value JSON,
-- ts = mz_timestamp}, a tombstone a hash {ts} without v.
--
-- Timestamps are uint64 decimals without leading zeros, compared as
-- strings (length, then bytes): Lua's numbers are doubles and would round
-- past 2^53.
local function older(a, b)
  if #a ~= #b then
    return #a < #b
  end
  return a < b
end

-- fenced is the error of a writer that lost its place: the checkpoint, the
-- claimed generation or the active generation is not what it expects. The
-- prefix FENCED is matched by the Go side.
local function fenced(what, got, want)
  return redis.error_reply('FENCED ' .. what .. ' is "' .. tostring(got) .. '", expected "' .. want .. '"')
end

-- shardtail_apply writes one batch (or one partial chunk) and, with a next
-- position, the checkpoint, in one atomic step.
--
-- KEYS[1] checkpoint, KEYS[2] active pointer, KEYS[3] loading claim,
-- KEYS[4..] the batch's data keys, in ARGV order.
-- ARGV[1] expected checkpoint ('' when none was ever committed)
-- ARGV[2] next checkpoint ('' for a partial chunk: check, do not advance)
-- ARGV[3] claimed generation the batch loads ('' when it writes the active one)
-- ARGV[4] the prefix written: the active pointer's value, or the claimed
--         generation's prefix, which becomes active with a next checkpoint
-- ARGV[5] '1' to keep tombstones
-- ARGV[6..] per data key 'u<ts>' then the value, or 'd<ts>'
--
-- Returns {applied, stale}: writes done, and writes the timestamp guard
-- rejected because the stored row is as new or newer.
local function apply(keys, args)
  local cur = redis.call('GET', keys[1]) or ''
  if cur ~= args[1] then
    return fenced('checkpoint', cur, args[1])
  end
  local loading = args[3]
  if loading ~= '' then
    local claim = redis.call('GET', keys[3]) or ''
    if claim ~= loading then
      return fenced('loading generation', claim, loading)
    end
  else
    local active = redis.call('GET', keys[2]) or ''
    if active ~= args[4] then
      return fenced('active generation', active, args[4])
    end
  end
  local tombstones = args[5] == '1'
  local applied, stale = 0, 0
  local a = 6
  for k = 4, #keys do
    local key = keys[k]
    local meta = args[a]
    local op, ts = string.sub(meta, 1, 1), string.sub(meta, 2)
    a = a + 1
    local stored = redis.call('HGET', key, 'ts')
    if op == 'u' then
      local value = args[a]
      a = a + 1
      -- An upsert at the stored row's own timestamp wins only over a
      -- tombstone: within one timestamp an update is a retraction and an
      -- insertion in either order, possibly in two partial chunks.
      if not stored or older(stored, ts)
          or (stored == ts and redis.call('HEXISTS', key, 'v') == 0) then
        redis.call('HSET', key, 'v', value, 'ts', ts)
        applied = applied + 1
      else
        stale = stale + 1
      end
    else
      if not stored or older(stored, ts) then
        if tombstones then
          redis.call('HDEL', key, 'v')
          redis.call('HSET', key, 'ts', ts)
        else
          redis.call('DEL', key)
        end
        applied = applied + 1
      else
        stale = stale + 1
      end
    end
  end
  if args[2] ~= '' then
    redis.call('SET', keys[1], args[2])
    if loading ~= '' then
      -- The loaded generation becomes the one readers see, in the same
      -- step as its checkpoint.
      redis.call('SET', keys[2], args[4])
      redis.call('DEL', keys[3])
    end
  end
  return {applied, stale}
end

-- shardtail_claim starts loading a new generation: it takes the next
-- generation number, records it as the one being loaded (superseding, and
-- so fencing, any earlier claim) and in the durable list of generations
-- that may hold keys, all before any key of it is written.
--
-- KEYS[1] checkpoint, KEYS[2] loading claim, KEYS[3] generation counter,
-- KEYS[4] generation list. ARGV[1] expected checkpoint.
local function claim(keys, args)
  local cur = redis.call('GET', keys[1]) or ''
  if cur ~= args[1] then
    return fenced('checkpoint', cur, args[1])
  end
  local n = redis.call('INCR', keys[3])
  redis.call('SET', keys[2], n)
  redis.call('RPUSH', keys[4], n)
  return n
end

-- shardtail_get reads a row's value in the active generation, the pointer
-- and the key in one atomic step, so a reader never sees a generation that
-- is being deleted. KEYS[1] active pointer; ARGV[1] the key's JSON array.
local function get(keys, args)
  local prefix = redis.call('GET', keys[1])
  if not prefix then
    return nil
  end
  return redis.call('HGET', prefix .. args[1], 'v')
end

redis.register_function('shardtail_apply', apply)
redis.register_function('shardtail_claim', claim)
redis.register_function{function_name = 'shardtail_get', callback = get, flags = {'no-writes'}}
