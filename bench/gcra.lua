-- gcra.lua: redis-cell's CL.THROTTLE as a Redis Lua script, the baseline that
-- bench/compare runs on redis-server against throttled's native CL.THROTTLE.
--
--   EVALSHA <sha> 1 <key> <max_burst> <count> <period> [<quantity>]
--
-- Reply: {limited, limit, remaining, retry_after, reset_after}, as redis-cell
-- 0.4/0.5 and throttled answer (reference/redis-cell.md sections 2, 2.1, 3, 7):
--
--   T = floor(period*1e9 / count)       tau = T*(max_burst+1)     inc = T*quantity
--   tat = stored TAT, or now when the key is missing
--   new_tat = max(tat, now) + inc        diff = now - (new_tat - tau)
--   limited = diff < 0; allowed calls store new_tat (decimal ns) with
--   PX floor_ms(new_tat - now), or PXAT this millisecond when that is 0;
--   limited calls write nothing.
--
-- Lua 5.1 numbers are doubles, exact only below 2^53, and a Unix time in ns
-- (~1.8e18) is not. So absolute times are never formed as one number: "now"
-- and the stored TAT are kept as (seconds, nanoseconds) pairs and all the
-- arithmetic is done on ns *relative to now*, which is exact while the
-- durations involved stay below 2^53 ns (~104 days). The quotients (T and
-- remaining) are exact for the same reason: a correctly rounded double
-- quotient of integers below 2^53 never rounds up to the next integer.
--
-- Time comes from TIME (µs resolution, scaled to ns). Redis 7 replicates
-- script effects, so calling TIME before a write is allowed.

local key = KEYS[1]

local function int_arg(i, default)
  local s = ARGV[i]
  if s == nil then
    return default
  end
  if not string.find(s, '^%d+$') or string.len(s) > 15 then
    return nil
  end
  return tonumber(s)
end

local burst = int_arg(1)
local count = int_arg(2)
local period = int_arg(3)
local quantity = int_arg(4, 1)
if burst == nil or count == nil or period == nil or quantity == nil then
  return redis.error_reply('ERR gcra.lua: arguments must be integers in [0, 10^15)')
end
if count == 0 or period == 0 then
  return redis.error_reply('ERR zero rates are not supported')
end

local NS = 1000000000

local T = math.floor(period * NS / count) -- emission interval, ns
local limit = burst + 1
local tau = T * limit
local inc = T * quantity

local t = redis.call('TIME')
local now_s = tonumber(t[1])
local now_ns = tonumber(t[2]) * 1000

-- rel: stored TAT minus now, in ns (0 when the key is missing: tat = now).
local rel = 0
local stored = redis.call('GET', key)
if stored then
  if not string.find(stored, '^%d+$') then
    return redis.error_reply('ERR value is not an integer or out of range')
  end
  local len = string.len(stored)
  local tat_s, tat_ns = 0, tonumber(stored)
  if len > 9 then
    tat_s = tonumber(string.sub(stored, 1, len - 9))
    tat_ns = tonumber(string.sub(stored, len - 8))
  end
  rel = (tat_s - now_s) * NS + (tat_ns - now_ns)
end

local new_rel = math.max(rel, 0) + inc -- new_tat - now
local diff = tau - new_rel             -- now - allow_at

-- redis-cell 0.4/0.5 seconds: whole seconds, +1 when the sub-second part has
-- at least one whole millisecond (a ceiling at ms resolution). Negative
-- durations truncate toward zero; -1 s passes through as -1.
local function seconds(d)
  local s, sub
  if d >= 0 then
    s = math.floor(d / NS)
  else
    s = -math.floor(-d / NS)
  end
  sub = d - s * NS
  if sub >= 1000000 then
    s = s + 1
  end
  return s
end

local limited, retry, ttl
if diff < 0 then
  limited = 1
  if inc <= tau then
    retry = seconds(-diff)
  else
    retry = -1
  end
  ttl = rel
else
  limited = 0
  retry = -1
  ttl = new_rel
  local px = math.floor(new_rel / 1000000)
  if new_rel > 0 then
    -- new_tat = now + new_rel, written as decimal ns without leaving integers.
    local total = now_ns + new_rel
    local carry = math.floor(total / NS)
    local tat = string.format('%d%09d', now_s + carry, total - carry * NS)
    if px > 0 then
      redis.call('SET', key, tat, 'PX', px)
    else
      -- Under 1 ms left: redis-cell's 0 ms expiry keeps the key to the end
      -- of this millisecond (Redis drops a key after its expiry
      -- millisecond), so further calls within it are limited. SET PX 0 is
      -- an error; PXAT this millisecond is the same expiry.
      redis.call('SET', key, tat, 'PXAT',
        string.format('%d', now_s * 1000 + math.floor(now_ns / 1000000)))
    end
  else
    -- A peek at a full bucket: the same as no key, so none is left.
    redis.call('DEL', key)
  end
end

local next_ = tau - ttl
local remaining = 0
if next_ > 0 then
  remaining = math.floor(next_ / T)
end

return {limited, limit, remaining, retry, seconds(ttl)}
