-- throttled_conn: what the gateway modules of this folder share: where
-- throttled is, a pooled and authenticated connection to it, and what a
-- request gets when throttled gives no decision.
--
-- Where throttled is, from the environment (list these with nginx's `env`
-- directive): THROTTLED_HOST (127.0.0.1), THROTTLED_PORT (6379),
-- THROTTLED_USERNAME (none), THROTTLED_PASSWORD (none), THROTTLED_DB (0),
-- THROTTLED_TIMEOUT_MS (1000). With a password the connection logs in with
-- AUTH <password>, or AUTH <username> <password> when a username is set.
-- Connections are pooled (set_keepalive); AUTH and SELECT are sent only on a
-- new connection, as Kong's plugins do.

-- OpenResty ships lua-resty-redis as resty.redis; Debian's lua-nginx-redis
-- installs the same library as nginx.redis.
local has_resty, redis = pcall(require, "resty.redis")
if not has_resty then
  redis = require "nginx.redis"
end

local ngx = ngx
local fmt = string.format
local tonumber = tonumber

local _M = {}

local function env(name, default)
  local v = os.getenv(name)
  if v == nil or v == "" then
    return default
  end
  return v
end

local conf = {
  host = env("THROTTLED_HOST", "127.0.0.1"),
  port = tonumber(env("THROTTLED_PORT", "6379")),
  username = env("THROTTLED_USERNAME", nil),
  password = env("THROTTLED_PASSWORD", nil),
  db = tonumber(env("THROTTLED_DB", "0")),
  timeout = tonumber(env("THROTTLED_TIMEOUT_MS", "1000")),
}
-- One pool per server and database, so a pooled connection always has the
-- database it was given with SELECT.
local pool = fmt("%s:%d;%d", conf.host, conf.port, conf.db)

-- timeout is how long a call to throttled may take, in ms.
_M.timeout = conf.timeout

-- connect returns a connection from the pool, authenticated and on the
-- configured database. Once a reply was read whole, hand it back with
-- red:set_keepalive(10000, 100); after a socket error, red:close() it.
function _M.connect()
  local red = redis:new()
  red:set_timeout(conf.timeout)
  local ok, err = red:connect(conf.host, conf.port, { pool = pool })
  if not ok then
    return nil, "connect: " .. err
  end
  local times, err = red:get_reused_times()
  if not times then
    return nil, "get_reused_times: " .. err
  end
  if times == 0 then
    if conf.password then
      local ok, err
      if conf.username then
        ok, err = red:auth(conf.username, conf.password)
      else
        ok, err = red:auth(conf.password)
      end
      if not ok then
        red:close()
        return nil, "auth: " .. err
      end
    end
    if conf.db ~= 0 then
      local ok, err = red:select(conf.db)
      if not ok then
        red:close()
        return nil, "select: " .. err
      end
    end
  end
  return red
end

-- call runs one command on a pooled connection and returns its reply, or
-- nil and an error: a socket error, or an error reply (such as NOPERM)
-- after "label: ".
function _M.call(label, cmd, ...)
  local red, err = _M.connect()
  if not red then
    return nil, err
  end
  -- lua-resty-redis sends any method name as the command name.
  local res, err = red[cmd](red, ...)
  if res == nil then
    red:close() -- a socket error: the connection is not reusable
    return nil, err
  end
  red:set_keepalive(10000, 100)
  if res == false then
    return nil, label .. ": " .. err
  end
  return res
end

-- fail_open reads $throttle_fail_open: true for "on", false for "off" or
-- unset (nil when no location sets it, "" when another one does: fail
-- closed); any other value is a mistake, returned as an error.
function _M.fail_open()
  local v = ngx.var.throttle_fail_open
  if v ~= nil and v ~= "" and v ~= "on" and v ~= "off" then
    return nil, "$throttle_fail_open must be on or off, not " .. v
  end
  return v == "on"
end

-- no_decision logs why throttled gave no decision and lets the request
-- through (fail_open) or answers 503.
function _M.no_decision(who, err, fail_open)
  if fail_open then
    ngx.log(ngx.ERR, who, ": ", err, " (failing open: request let through)")
    return
  end
  ngx.log(ngx.ERR, who, ": ", err, " (failing closed: 503)")
  return ngx.exit(ngx.HTTP_SERVICE_UNAVAILABLE)
end

-- too_many answers 429 with Retry-After (left out when retry_after is
-- negative: the request could never pass) and a JSON body saying so,
-- naming the policy when one is given.
function _M.too_many(retry_after, policy)
  ngx.status = ngx.HTTP_TOO_MANY_REQUESTS
  if retry_after >= 0 then
    ngx.header["Retry-After"] = retry_after
  end
  ngx.header["Content-Type"] = "application/json"
  if policy then
    ngx.say(fmt('{"error":"rate limited","policy":"%s","retry_after":%d}', policy, retry_after))
  else
    ngx.say(fmt('{"error":"rate limited","retry_after":%d}', retry_after))
  end
  return ngx.exit(ngx.HTTP_TOO_MANY_REQUESTS)
end

return _M
