-- throttled-policy: a Kong plugin that asks throttled one question per
-- request,
--
--   THROTTLE.POLICY <method> <raw path> <principal> [TENANT <tenant>]
--
-- and lets the policies held in throttled decide (docs/policies.md): the
-- endpoint, the policy, its tiers and their keys are the server's. The
-- principal is the authenticated consumer's id, else the client's address;
-- the tenant is the value of conf.tenant_header when set.
--
-- A limited request gets 429 {"message":"API rate limit exceeded"} with
-- Retry-After; every decided response carries X-RateLimit-Limit,
-- X-RateLimit-Remaining, X-RateLimit-Reset (the deciding tier) and the IETF
-- draft's RateLimit-Policy and RateLimit fields (one item per tier,
-- "<policy>.<tier>"). A request no policy applies to passes without them.
--
-- When throttled gives no decision (it cannot be reached, or it answers an
-- error such as NOPERM), the error is logged; with fault_tolerant false
-- (the default) the request gets 503, with true it passes.
--
-- Install: copy this folder to kong/plugins/throttled-policy on Kong's
-- Lua path and add it to `plugins` (KONG_PLUGINS=bundled,throttled-policy).

local redis = require "resty.redis"

local kong = kong
local fmt = string.format
local ceil = math.ceil
local concat = table.concat
local null = ngx.null

local ThrottledPolicy = {
  PRIORITY = 901, -- just after Kong's rate-limiting (910)
  VERSION = "1.0.0",
}

-- connect returns a pooled connection, authenticated and on the database
-- (AUTH and SELECT only when it is new).
local function connect(conf)
  local red = redis:new()
  red:set_timeout(conf.timeout) -- set_timeouts is newer than some lua-resty-redis
  local ok, err = red:connect(conf.host, conf.port, { pool = fmt("%s:%d;%d", conf.host, conf.port, conf.database) })
  if not ok then
    return nil, "connect: " .. err
  end
  local times, err = red:get_reused_times()
  if not times then
    return nil, "get_reused_times: " .. err
  end
  if times == 0 then
    if conf.password and conf.password ~= "" then
      if conf.username and conf.username ~= "" then
        ok, err = red:auth(conf.username, conf.password)
      else
        ok, err = red:auth(conf.password)
      end
      if not ok then
        red:close()
        return nil, "auth: " .. err
      end
    end
    if conf.database ~= 0 then
      ok, err = red:select(conf.database)
      if not ok then
        red:close()
        return nil, "select: " .. err
      end
    end
  end
  return red
end

local function is_int(v)
  return type(v) == "number" and v == math.floor(v)
end

-- is_decision: res has THROTTLE.POLICY's shape (docs/policies.md).
local function is_decision(res)
  if type(res) ~= "table" or #res ~= 10 or (res[1] ~= 0 and res[1] ~= 1) then
    return false
  end
  if res[2] ~= null and type(res[2]) ~= "string" or type(res[3]) ~= "string" or type(res[10]) ~= "table" then
    return false
  end
  for i = 4, 9 do
    if not is_int(res[i]) then
      return false
    end
  end
  for _, tier in ipairs(res[10]) do
    if type(tier) ~= "table" or #tier ~= 6 then
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

-- decide sends THROTTLE.POLICY; it returns the reply, or nil and an error.
local function decide(conf, method, path, principal, tenant)
  local red, err = connect(conf)
  if not red then
    return nil, err
  end
  local res
  if tenant then
    res, err = red["throttle.policy"](red, method, path, principal, "TENANT", tenant)
  else
    res, err = red["throttle.policy"](red, method, path, principal)
  end
  if res == nil then
    red:close() -- a socket error: the connection is not reusable
    return nil, err
  end
  red:set_keepalive(10000, 100)
  if res == false then
    return nil, "THROTTLE.POLICY " .. method .. " " .. path .. ": " .. err
  end
  if not is_decision(res) then
    return nil, "THROTTLE.POLICY " .. method .. " " .. path .. ": not a THROTTLE.POLICY reply"
  end
  return res
end

local function seconds(ms)
  return ceil(ms / 1000)
end

-- headers are the rate-limit headers of a decision.
local function headers(res)
  local id = res[2]
  local h = {
    ["X-RateLimit-Limit"] = res[5],
    ["X-RateLimit-Remaining"] = res[6],
    ["X-RateLimit-Reset"] = seconds(res[7]),
  }
  if res[9] == 1 then
    h["X-RateLimit-Shadow"] = "limited"
  end
  local policies, states = {}, {}
  for i, tier in ipairs(res[10]) do
    local name = fmt('"%s.%d"', id, i)
    policies[i] = fmt("%s;q=%d;w=%d", name, tier[2], seconds(tier[6]))
    states[i] = fmt("%s;r=%d;t=%d", name, tier[3], seconds(tier[4]))
  end
  h["RateLimit-Policy"] = concat(policies, ", ")
  h["RateLimit"] = concat(states, ", ")
  return h
end

function ThrottledPolicy:access(conf)
  local principal
  local consumer = kong.client.get_consumer()
  if consumer and consumer.id then
    principal = "consumer:" .. consumer.id
  else
    principal = "ip:" .. kong.client.get_forwarded_ip()
  end
  local tenant
  if conf.tenant_header then
    tenant = kong.request.get_header(conf.tenant_header)
  end
  local method, path = kong.request.get_method(), kong.request.get_raw_path()

  local res, err = decide(conf, method, path, principal, tenant)
  if not res then
    if conf.fault_tolerant then
      kong.log.err("throttled-policy: ", err, " (fault_tolerant: request let through)")
      return
    end
    kong.log.err("throttled-policy: ", err, " (503)")
    return kong.response.exit(503, { message = "Rate limiter unavailable" })
  end
  if res[2] == null then
    return -- no policy applies
  end
  local h = headers(res)
  if res[1] == 1 then
    h["Retry-After"] = seconds(res[8])
    return kong.response.exit(429, { message = "API rate limit exceeded" }, h)
  end
  kong.ctx.plugin.headers = h
end

function ThrottledPolicy:header_filter(conf)
  local h = kong.ctx.plugin.headers
  if h then
    kong.response.set_headers(h)
  end
end

return ThrottledPolicy
