-- throttled_policy: an access_by_lua rate limiter for nginx-lua/OpenResty
-- that asks throttled one question per request, THROTTLE.POLICY, and lets
-- the policies held in throttled (docs/policies.md) decide: which endpoint
-- the path is, which policy and tiers apply, and on which keys.
--
-- In a location:
--
--   set $throttle_principal $http_x_api_key;  # who is limited ("": the address)
--   set $throttle_tenant    $http_x_tenant;   # optional: the tenant
--   access_by_lua_block        { require("throttled_policy").access() }
--   header_filter_by_lua_block { require("throttled_policy").header_filter() }
--
-- The request's method and raw path ($request_uri: throttled normalizes it
-- and drops the query) are sent as they came:
--
--   THROTTLE.POLICY <method> <path> <principal> [TENANT <tenant>]
--
-- Allowed requests go on; limited ones get 429 with Retry-After. Both carry
--
--   X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset (seconds)
--     of the deciding tier, and, one item per tier of the policy, the IETF
--     draft's (draft-ietf-httpapi-ratelimit-headers-09)
--   RateLimit-Policy: "<id>.<tier>";q=<limit>;w=<window s>, ...
--   RateLimit: "<id>.<tier>";r=<remaining>;t=<reset s>, ...
--
-- A request no policy applies to passes without headers. A shadow policy
-- never refuses; the request then carries X-RateLimit-Shadow: limited.
--
-- When throttled gives no decision (it cannot be reached, or it answers an
-- error or a reply that is not THROTTLE.POLICY's), the error is logged and
-- $throttle_fail_open decides as in throttled_gateway: unset or "off" answers
-- 503 (fail closed), "on" lets the request through. Where throttled is and
-- how the module connects: throttled_conn.lua.

local conn = require "throttled_conn"

local ngx = ngx
local fmt = string.format
local ceil = math.ceil
local concat = table.concat

local _M = { _VERSION = "1.0" }

local function is_int(v)
  return type(v) == "number" and v == math.floor(v)
end

-- is_decision tells whether res has the shape of a THROTTLE.POLICY reply:
-- limited, id (nil when no policy applies), endpoint, six integers and the
-- tiers, each [algorithm, limit, remaining, reset_ms, retry_after_ms,
-- window_ms].
local function is_decision(res)
  if type(res) ~= "table" or #res ~= 10 or (res[1] ~= 0 and res[1] ~= 1) then
    return false
  end
  if res[2] ~= ngx.null and type(res[2]) ~= "string" or type(res[3]) ~= "string" then
    return false
  end
  for i = 4, 9 do
    if not is_int(res[i]) then
      return false
    end
  end
  if type(res[10]) ~= "table" then
    return false
  end
  for _, tier in ipairs(res[10]) do
    if type(tier) ~= "table" or #tier ~= 6 or type(tier[1]) ~= "string" then
      return false
    end
    for i = 2, 6 do
      if not is_int(tier[i]) then
        return false
      end
    end
  end
  return true
end

-- decide sends THROTTLE.POLICY and returns its reply, or nil and an error.
local function decide(method, path, principal, tenant)
  local label = "THROTTLE.POLICY " .. method .. " " .. path
  local res, err
  if tenant then
    res, err = conn.call(label, "throttle.policy", method, path, principal, "TENANT", tenant)
  else
    res, err = conn.call(label, "throttle.policy", method, path, principal)
  end
  if res == nil then
    return nil, err
  end
  if not is_decision(res) then
    return nil, label .. ": not a THROTTLE.POLICY reply"
  end
  return res
end

-- seconds is a duration in ms in whole seconds, rounded up.
local function seconds(ms)
  return ceil(ms / 1000)
end

-- access decides the request. Call it from access_by_lua.
function _M.access()
  local fail_open, err = conn.fail_open()
  if err then
    ngx.log(ngx.ERR, "throttled_policy: ", err)
    return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
  end
  local principal = ngx.var.throttle_principal
  if principal == nil or principal == "" then
    principal = ngx.var.remote_addr
  end
  local tenant = ngx.var.throttle_tenant
  if tenant == "" then
    tenant = nil
  end

  local res, err = decide(ngx.req.get_method(), ngx.var.request_uri, principal, tenant)
  if not res then
    return conn.no_decision("throttled_policy", err, fail_open)
  end
  local limited, id = res[1], res[2]
  if id == ngx.null then
    return -- no policy applies
  end
  ngx.ctx.throttled_policy = res
  if limited == 1 then
    return conn.too_many(seconds(res[8]), id)
  end
end

-- header_filter adds the rate-limit headers to the response, the
-- upstream's or the 429. Call it from header_filter_by_lua.
function _M.header_filter()
  local res = ngx.ctx.throttled_policy
  if not res then
    return
  end
  local id = res[2]
  ngx.header["X-RateLimit-Limit"] = res[5]
  ngx.header["X-RateLimit-Remaining"] = res[6]
  ngx.header["X-RateLimit-Reset"] = seconds(res[7])
  if res[9] == 1 then
    ngx.header["X-RateLimit-Shadow"] = "limited"
  end
  -- Policy ids are letters, digits and - _ . : a structured-field string
  -- needs no escaping.
  local policies, states = {}, {}
  for i, tier in ipairs(res[10]) do
    local name = fmt('"%s.%d"', id, i)
    policies[i] = fmt("%s;q=%d;w=%d", name, tier[2], seconds(tier[6]))
    states[i] = fmt("%s;r=%d;t=%d", name, tier[3], seconds(tier[4]))
  end
  ngx.header["RateLimit-Policy"] = concat(policies, ", ")
  ngx.header["RateLimit"] = concat(states, ", ")
end

return _M
