-- throttled_gateway: an access_by_lua rate limiter for nginx-lua/OpenResty
-- that asks throttled (or Redis with the redis-cell module) for a
-- CL.THROTTLE decision on every request.
--
-- In a location:
--
--   set $throttle_key    "api:$throttle_client";  # who is limited
--   set $throttle_burst  15;                      # max_burst: limit = burst + 1
--   set $throttle_count  30;                      # count per period ...
--   set $throttle_period 60;                      # ... period in seconds
--   set $throttle_policy "default";               # name in the RateLimit headers
--   access_by_lua_block        { require("throttled_gateway").access() }
--   header_filter_by_lua_block { require("throttled_gateway").header_filter() }
--
-- Allowed requests go on (to proxy_pass, ...); limited ones get 429 with
-- Retry-After. Both carry the IETF draft headers
-- (draft-ietf-httpapi-ratelimit-headers-09):
--
--   RateLimit-Policy: "<policy>";q=<limit>;w=<period>
--   RateLimit: "<policy>";r=<remaining>;t=<reset_after>
--
-- Where throttled is and how the module connects: throttled_conn.lua.
--
-- When throttled gives no decision (it cannot be reached, or it answers an
-- error such as NOPERM or a reply that is not CL.THROTTLE's), the error is
-- logged and $throttle_fail_open decides: "on" lets the request through
-- (fail open), "off" answers 503 (fail closed). Left unset it fails closed:
-- a request passes unlimited only where the operator chose that. Any other
-- value is a mistake: every request gets 500 and the error is logged.

local conn = require "throttled_conn"

local ngx = ngx
local fmt = string.format
local tonumber = tonumber

local _M = { _VERSION = "1.0" }

-- is_decision tells whether res has the shape of a CL.THROTTLE reply: five
-- integers, the first 0 (allowed) or 1 (limited).
local function is_decision(res)
  if type(res) ~= "table" or #res ~= 5 then
    return false
  end
  for i = 1, 5 do
    if type(res[i]) ~= "number" then
      return false
    end
  end
  return res[1] == 0 or res[1] == 1
end

-- throttle runs CL.THROTTLE key burst count period 1 and returns its reply
-- (a table of five integers), or nil and an error.
local function throttle(key, burst, count, period)
  local red, err = conn.connect()
  if not red then
    return nil, err
  end
  -- lua-resty-redis sends any method name as the command name, so the
  -- dotted module command is called by indexing with its name.
  local res, err = red["cl.throttle"](red, key, burst, count, period, 1)
  if res == nil then
    -- a socket error: the connection is not reusable
    red:close()
    return nil, err
  end
  -- A reply was read whole: the connection can serve the next request.
  red:set_keepalive(10000, 100)
  if res == false then
    -- an error reply, e.g. "NOPERM ..." or "ERR ..."
    return nil, "CL.THROTTLE " .. key .. ": " .. err
  end
  if not is_decision(res) then
    return nil, "CL.THROTTLE " .. key .. ": not a CL.THROTTLE reply"
  end
  return res
end

local function number_var(name)
  local v = tonumber(ngx.var[name])
  if not v or v < 0 or v ~= math.floor(v) then
    return nil
  end
  return v
end

-- access decides the request. Call it from access_by_lua.
function _M.access()
  local key = ngx.var.throttle_key
  local burst = number_var("throttle_burst")
  local count = number_var("throttle_count")
  local period = number_var("throttle_period")
  if not key or key == "" or not burst or not count or not period then
    ngx.log(ngx.ERR, "throttled_gateway: set $throttle_key, $throttle_burst, $throttle_count and $throttle_period")
    return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
  end
  local fail_open, err = conn.fail_open()
  if err then
    ngx.log(ngx.ERR, "throttled_gateway: ", err)
    return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
  end
  local policy = ngx.var.throttle_policy
  -- The policy name is sent as a quoted structured-field string: keep it to
  -- characters that need no escaping.
  if not policy or not policy:match("^[%w%-_.:/]+$") then
    policy = "default"
  end

  local res, err = throttle(key, burst, count, period)
  if not res then
    return conn.no_decision("throttled_gateway", err, fail_open)
  end

  local limited, limit, remaining, retry_after, reset_after = res[1], res[2], res[3], res[4], res[5]
  ngx.ctx.throttled = {
    policy = policy,
    limit = limit,
    period = period,
    remaining = remaining,
    reset_after = reset_after,
  }
  if limited == 1 then
    -- retry_after is -1 only when the request could never pass
    return conn.too_many(retry_after)
  end
end

-- header_filter adds the RateLimit headers to the response, the upstream's
-- or the 429. Call it from header_filter_by_lua.
function _M.header_filter()
  local t = ngx.ctx.throttled
  if not t then
    return
  end
  ngx.header["RateLimit-Policy"] = fmt('"%s";q=%d;w=%d', t.policy, t.limit, t.period)
  ngx.header["RateLimit"] = fmt('"%s";r=%d;t=%d', t.policy, t.remaining, t.reset_after)
end

return _M
