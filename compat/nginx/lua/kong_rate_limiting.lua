-- kong_rate_limiting: what Kong's rate-limiting plugin sends to Redis with
-- policy "redis", replayed under Debian's nginx-extras + lua-nginx-redis so
-- the compat tests can run it against throttled (Kong itself is not
-- packaged). The wire traffic is Kong's: the connection helper (AUTH, then
-- SELECT, only on a fresh pooled connection; set_keepalive(10000, 100); pool
-- "host:port;db" when db ~= 0), the INFO server version probe, and per
-- version:
--
--   Kong 3.4+ (sync_rate = -1, the default): usage() runs the EVAL script
--     below (INCR, EXPIRE when it is 1, return incr - 1) once per period;
--     increment() sends nothing.
--   Kong 3.4+ (sync_rate > 0): the sync timer sends one pipeline with an EVAL
--     per counter (EXISTS, INCRBY, EXPIREAT when new); the script returns
--     nothing, so every reply is a nil bulk.
--   Kong 2.8 - 3.3: usage() is GET per period; increment() sends EXISTS per
--     period, one at a time, then one pipeline of INCRBY (+ EXPIRE for the keys
--     that did not exist).
--
-- The script texts are byte for byte Kong's (kong/plugins/rate-limiting/
-- policies/init.lua), leading whitespace included, since a server that
-- cached scripts by SHA1 would see exactly these. The handler logic (usage
-- per period, stop, headers, 429) follows Kong 3.x's handler.lua. Two
-- deliberate differences, both for exact test timelines: the clock Kong reads
-- (ngx.now()) can be given by the X-Kong-Now-Ms request header, and Kong
-- 2.8's increment, which Kong runs in a zero-delay timer, runs inline.
--
-- Errors are handled as Kong's handler does (the same in 2.8 and 3.4): when
-- usage() fails (Redis cannot be reached, or answers an error reply such as
-- NOPERM), with fault_tolerant = false the plugin raises the error, which
-- Kong logs and answers with 500 {"message":"An unexpected error occurred"};
-- with fault_tolerant = true (Kong's default) it logs "failed to get usage:
-- <error>" and lets the request through without rate-limit headers. Kong
-- 2.8's increment runs after the response is decided, so its errors are
-- only logged.
--
-- Configuration: env THROTTLED_HOST, THROTTLED_PORT, THROTTLED_PASSWORD;
-- nginx variables $kong_version ("3.4" or "2.8"), $kong_redis_database,
-- $kong_redis_username, $kong_fault_tolerant ("true" or "false"); request
-- headers X-Kong-Limits ("minute=5 hour=8"), X-Consumer (the identifier;
-- default the client address).
-- Test-only response headers: X-Redis-Reused-Times (get_reused_times() of
-- each connection the request took, comma-separated) and X-Redis-Version
-- (what the INFO server probe parsed).

local has_resty, redis = pcall(require, "resty.redis")
if not has_resty then
  redis = require "nginx.redis"
end

local ngx = ngx
local null = ngx.null
local fmt = string.format
local floor = math.floor
local max = math.max

local _M = {}

local EMPTY_UUID = "00000000-0000-0000-0000-000000000000"

-- kong/plugins/rate-limiting/expiration.lua (month and year, which need a
-- calendar, are left out).
local EXPIRATION = { second = 1, minute = 60, hour = 3600, day = 86400 }
local TITLE = { second = "Second", minute = "Minute", hour = "Hour", day = "Day" }

-- Kong 3.4+'s per-request usage script, exactly as sent.
local USAGE_SCRIPT_34 = [[
        local cache_key, expiration = KEYS[1], ARGV[1]
        local result_incr = redis.call("incr", cache_key)
        if result_incr == 1 then
          redis.call("expire", cache_key, expiration)
        end

        return result_incr - 1
      ]]

-- Kong 3.4+'s sync script (sync_rate > 0), exactly as sent.
local SYNC_SCRIPT_34 = [[
      local key, value, expiration = KEYS[1], tonumber(ARGV[1]), ARGV[2]
      local exists = redis.call("exists", key)
      redis.call("incrby", key, value)
      if not exists or exists == 0 then
        redis.call("expireat", key, expiration)
      end
    ]]

local function env(name, default)
  local v = os.getenv(name)
  if v == nil or v == "" then
    return default
  end
  return v
end

local function is_present(s)
  return s and s ~= "" and s ~= null
end

local function redis_conf()
  return {
    host = env("THROTTLED_HOST", "127.0.0.1"),
    port = tonumber(env("THROTTLED_PORT", "6379")),
    password = env("THROTTLED_PASSWORD", nil),
    username = ngx.var.kong_redis_username,
    database = tonumber(ngx.var.kong_redis_database) or 0,
    timeout = 2000,
    fault_tolerant = ngx.var.kong_fault_tolerant ~= "false", -- Kong's default: true
  }
end

-- kong.tools.timestamp.get_timestamps for the periods above: the start of
-- each period containing now (ms), in ms (UTC, so epoch-aligned).
local function get_timestamps(now)
  local stamps = {}
  for period, secs in pairs(EXPIRATION) do
    local ms = secs * 1000
    stamps[period] = floor(now / ms) * ms
  end
  return stamps
end

local function get_local_key(identifier, period, period_date)
  -- no route or service: Kong uses the empty UUID for both
  return fmt("ratelimit:%s:%s:%s:%s:%s", EMPTY_UUID, EMPTY_UUID, identifier,
             period_date, period)
end

-- Kong's get_redis_connection.
local function get_redis_connection(conf)
  local red = redis:new()
  red:set_timeout(conf.timeout)
  local sock_opts = {}
  if conf.database ~= 0 then
    sock_opts.pool = fmt("%s:%d;%d", conf.host, conf.port, conf.database)
  end
  local ok, err = red:connect(conf.host, conf.port, sock_opts)
  if not ok then
    ngx.log(ngx.ERR, "failed to connect to Redis: ", err)
    return nil, err
  end
  local times, err = red:get_reused_times()
  if err then
    ngx.log(ngx.ERR, "failed to get connect reused times: ", err)
    return nil, err
  end
  local reused = ngx.ctx.reused or {}
  reused[#reused + 1] = times
  ngx.ctx.reused = reused
  if times == 0 then
    if is_present(conf.password) then
      local ok, err
      if is_present(conf.username) then
        ok, err = red:auth(conf.username, conf.password)
      else
        ok, err = red:auth(conf.password)
      end
      if not ok then
        ngx.log(ngx.ERR, "failed to auth Redis: ", err)
        return nil, err
      end
    end
    if conf.database ~= 0 then
      local ok, err = red:select(conf.database)
      if not ok then
        ngx.log(ngx.ERR, "failed to change Redis database: ", err)
        return nil, err
      end
    end
  end
  return red
end

-- kong/reports.lua retrieve_redis_version: INFO server once per worker.
local redis_version
local function retrieve_redis_version(red)
  if redis_version ~= nil then
    return
  end
  local info, err = red:info("server")
  if not info then
    redis_version = "unknown"
    ngx.log(ngx.WARN, "failed to retrieve Redis version: ", err)
    return
  end
  redis_version = info:match("redis_version:(%d+%.%d+)") or "unknown"
end

local policies = {}

policies["3.4"] = {
  usage = function(conf, identifier, period, current_timestamp)
    local periods = get_timestamps(current_timestamp)
    local cache_key = get_local_key(identifier, period, periods[period])
    local red, err = get_redis_connection(conf)
    if not red then
      return nil, err
    end
    retrieve_redis_version(red)
    local current_metric, err = red:eval(USAGE_SCRIPT_34, 1, cache_key, EXPIRATION[period])
    if err then
      return nil, err
    end
    if current_metric == null then
      current_metric = nil
    end
    local ok, err = red:set_keepalive(10000, 100)
    if not ok then
      ngx.log(ngx.ERR, "failed to set Redis keepalive: ", err)
    end
    return current_metric or 0
  end,
  increment = function()
    return true -- sync_rate = -1: usage() already counted
  end,
}

policies["2.8"] = {
  usage = function(conf, identifier, period, current_timestamp)
    local red, err = get_redis_connection(conf)
    if not red then
      return nil, err
    end
    retrieve_redis_version(red)
    local periods = get_timestamps(current_timestamp)
    local cache_key = get_local_key(identifier, period, periods[period])
    local current_metric, err = red:get(cache_key)
    if err then
      return nil, err
    end
    if current_metric == null then
      current_metric = nil
    end
    local ok, err = red:set_keepalive(10000, 100)
    if not ok then
      ngx.log(ngx.ERR, "failed to set Redis keepalive: ", err)
    end
    return tonumber(current_metric) or 0
  end,
  increment = function(conf, limits, identifier, current_timestamp, value)
    local red, err = get_redis_connection(conf)
    if not red then
      return nil, err
    end
    local keys, expirations, idx = {}, {}, 0
    local periods = get_timestamps(current_timestamp)
    for period, period_date in pairs(periods) do
      if limits[period] then
        local cache_key = get_local_key(identifier, period, period_date)
        local exists, err = red:exists(cache_key)
        if err then
          ngx.log(ngx.ERR, "failed to query Redis: ", err)
          return nil, err
        end
        idx = idx + 1
        keys[idx] = cache_key
        if not exists or exists == 0 then
          expirations[idx] = EXPIRATION[period]
        end
      end
    end
    red:init_pipeline()
    for i = 1, idx do
      red:incrby(keys[i], value)
      if expirations[i] then
        red:expire(keys[i], expirations[i])
      end
    end
    local res, err = red:commit_pipeline()
    if err then
      ngx.log(ngx.ERR, "failed to commit increment pipeline in Redis: ", err)
      return nil, err
    end
    -- Kong does not look at the pipeline's replies; a test must see an
    -- error among them all the same.
    for _, r in ipairs(res) do
      if type(r) == "table" and r[1] == false then
        ngx.log(ngx.ERR, "increment pipeline reply: ", tostring(r[2]))
        return nil, r[2]
      end
    end
    local ok, err = red:set_keepalive(10000, 100)
    if not ok then
      ngx.log(ngx.ERR, "failed to set Redis keepalive: ", err)
    end
    return true
  end,
}

local function parse_limits(s)
  local limits = {}
  for period, n in (s or ""):gmatch("(%a+)=(%d+)") do
    if EXPIRATION[period] then
      limits[period] = tonumber(n)
    end
  end
  return limits
end

local function now_ms()
  return tonumber(ngx.var.http_x_kong_now_ms) or floor(ngx.now() * 1000)
end

local function finish(status, headers, body)
  ngx.status = status
  for k, v in pairs(headers) do
    ngx.header[k] = v
  end
  ngx.header["X-Redis-Reused-Times"] = table.concat(ngx.ctx.reused or {}, ",")
  ngx.header["X-Redis-Version"] = redis_version
  ngx.header["Content-Type"] = "application/json"
  ngx.say(body)
  return ngx.exit(status)
end

-- handle is the plugin's access phase, as content: 200 or 429 with Kong's
-- headers.
function _M.handle()
  local policy = policies[ngx.var.kong_version]
  local conf = redis_conf()
  local limits = parse_limits(ngx.var.http_x_kong_limits)
  local identifier = ngx.var.http_x_consumer or ngx.var.remote_addr
  local current_timestamp = now_ms()

  -- get_usage: the first period whose usage fails fails it all.
  local usage, stop = {}, nil
  for period, limit in pairs(limits) do
    local current_usage, err = policy.usage(conf, identifier, period, current_timestamp)
    if not current_usage then
      if not conf.fault_tolerant then
        -- Kong: error(err) in the plugin; the runloop logs it, after the
        -- plugin's name, and answers 500.
        ngx.log(ngx.ERR, "rate-limiting: ", tostring(err))
        return finish(500, {}, '{"message":"An unexpected error occurred"}')
      end
      ngx.log(ngx.ERR, "failed to get usage: ", tostring(err))
      usage, stop = nil, nil
      break
    end
    local remaining = limit - current_usage
    usage[period] = { limit = limit, remaining = remaining }
    if remaining <= 0 then
      stop = period
    end
  end

  -- headers (none when the usage is unknown)
  local headers = {}
  local reset, limit, window, remaining
  local timestamps = get_timestamps(current_timestamp)
  for k, v in pairs(usage or {}) do
    local current_limit = v.limit
    local current_window = EXPIRATION[k]
    local current_remaining = v.remaining
    if stop == nil or stop == k then
      current_remaining = current_remaining - 1
    end
    current_remaining = max(0, current_remaining)
    if not limit or current_remaining < remaining
       or (current_remaining == remaining and current_window > window) then
      limit = current_limit
      window = current_window
      remaining = current_remaining
      reset = max(1, window - floor((current_timestamp - timestamps[k]) / 1000))
    end
    headers["X-RateLimit-Limit-" .. TITLE[k]] = current_limit
    headers["X-RateLimit-Remaining-" .. TITLE[k]] = current_remaining
  end
  if usage then
    headers["RateLimit-Limit"] = limit
    headers["RateLimit-Remaining"] = remaining
    headers["RateLimit-Reset"] = reset
  end

  if stop then
    headers["Retry-After"] = reset
    return finish(429, headers, '{"message":"API rate limit exceeded"}')
  end

  -- Kong runs the increment after the response is decided (2.8: in a
  -- timer): a failure there is logged, by the policy, and changes nothing.
  policy.increment(conf, limits, identifier, current_timestamp, 1)
  return finish(200, headers, '{"message":"ok"}')
end

-- sync replays Kong 3.4+'s sync_to_redis for the counters of the
-- X-Kong-Deltas request header ("minute=7 hour=7"): one pipeline with an
-- EVAL per counter. It answers the pipeline's replies, "null" for each nil
-- bulk.
function _M.sync()
  local conf = redis_conf()
  local identifier = ngx.var.http_x_consumer or ngx.var.remote_addr
  local current_timestamp = now_ms()
  local periods = get_timestamps(current_timestamp)
  local red, err = get_redis_connection(conf)
  if not red then
    return finish(500, {}, fmt('{"message":%q}', err))
  end
  red:init_pipeline()
  local n = 0
  for period, delta in pairs(parse_limits(ngx.var.http_x_kong_deltas)) do
    local cache_key = get_local_key(identifier, period, periods[period])
    -- redis_expire_at: the period's start in seconds plus its expiration
    local expire_at = floor(periods[period] / 1000) + EXPIRATION[period]
    red:eval(SYNC_SCRIPT_34, 1, cache_key, delta, expire_at)
    n = n + 1
  end
  local res, err = red:commit_pipeline()
  if not res then
    return finish(500, {}, fmt('{"message":%q}', err))
  end
  local ok, err = red:set_keepalive(10000, 100)
  if not ok then
    ngx.log(ngx.ERR, "failed to set Redis keepalive: ", err)
  end
  local out = {}
  for i = 1, n do
    local r = res[i]
    if r == null then
      out[i] = "null"
    elseif type(r) == "table" and r[1] == false then
      out[i] = "error: " .. tostring(r[2])
    else
      out[i] = tostring(r)
    end
  end
  return finish(200, {}, table.concat(out, ","))
end

return _M
