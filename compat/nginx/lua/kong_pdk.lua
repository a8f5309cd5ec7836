-- kong_pdk: the part of Kong's PDK that examples/kong/plugins/throttled-policy
-- calls, over nginx-lua, so the compat tests run the plugin's own files
-- (handler.lua, schema.lua) under Debian's nginx-extras (Kong itself is not
-- packaged). Each function does what Kong 3.x documents:
--
--   kong.request.get_method, get_raw_path (the path as sent, without the
--     query), get_header
--   kong.client.get_consumer (here: X-Test-Consumer-Id, as if an auth plugin
--     had identified the consumer), get_forwarded_ip (the client address)
--   kong.response.exit(status, body, headers) (a table body is sent as
--     JSON), set_headers
--   kong.log.err, kong.ctx.plugin (one table per request)
--
-- run(phase) loads the plugin from $KONG_PLUGIN_DIR once, builds its conf
-- from schema.lua's defaults (see conf below), and calls the phase's
-- handler, as Kong does. lua-resty-redis is given to the
-- plugin as resty.redis, the name Kong bundles it under.

local _M = {}

package.loaded["resty.redis"] = package.loaded["resty.redis"] or require "nginx.redis"

local function json_string(s)
  return '"' .. tostring(s):gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
end

local function encode(body)
  local parts = {}
  for k, v in pairs(body) do
    parts[#parts + 1] = json_string(k) .. ":" .. json_string(v)
  end
  table.sort(parts)
  return "{" .. table.concat(parts, ",") .. "}"
end

local function set_headers(h)
  for k, v in pairs(h) do
    ngx.header[k] = v
  end
end

-- Kong's PDK is the global kong, as in Kong.
rawset(_G, "kong", {
  request = {
    get_method = function() return ngx.req.get_method() end,
    get_raw_path = function() return (ngx.var.request_uri:gsub("%?.*", "")) end,
    get_header = function(name) return ngx.req.get_headers()[name] end,
  },
  client = {
    get_consumer = function()
      local id = ngx.req.get_headers()["X-Test-Consumer-Id"]
      return id and { id = id } or nil
    end,
    get_forwarded_ip = function() return ngx.var.remote_addr end,
  },
  response = {
    set_headers = set_headers,
    exit = function(status, body, headers)
      ngx.status = status
      if headers then
        set_headers(headers)
      end
      if type(body) == "table" then
        ngx.header["Content-Type"] = "application/json; charset=utf-8"
        ngx.say(encode(body))
      elseif body then
        ngx.print(body)
      end
      return ngx.exit(status)
    end,
  },
  log = {
    err = function(...) ngx.log(ngx.ERR, ...) end,
  },
  ctx = setmetatable({}, {
    __index = function(_, k)
      if k == "plugin" then
        ngx.ctx.kong_plugin = ngx.ctx.kong_plugin or {}
        return ngx.ctx.kong_plugin
      end
    end,
  }),
})

local dir = os.getenv("KONG_PLUGIN_DIR")
local handler = assert(loadfile(dir .. "/handler.lua"))()
local schema = assert(loadfile(dir .. "/schema.lua"))()

-- defaults are the config record's defaults from schema.lua.
local defaults = {}
for _, field in ipairs(schema.fields) do
  if field.config then
    for _, f in ipairs(field.config.fields) do
      local name, def = next(f)
      defaults[name] = def.default
    end
  end
end

-- conf is the defaults with the connection from THROTTLED_HOST, _PORT and
-- _PASSWORD and the location's $kong_conf_username, _tenant_header and
-- _fault_tolerant set over them.
local function conf()
  local c = {}
  for k, v in pairs(defaults) do
    c[k] = v
  end
  c.host = os.getenv("THROTTLED_HOST") or c.host
  c.port = tonumber(os.getenv("THROTTLED_PORT")) or c.port
  c.password = os.getenv("THROTTLED_PASSWORD")
  local username, tenant_header = ngx.var.kong_conf_username, ngx.var.kong_conf_tenant_header
  c.username = username ~= "" and username or nil
  c.tenant_header = tenant_header ~= "" and tenant_header or nil
  c.fault_tolerant = ngx.var.kong_conf_fault_tolerant == "true"
  return c
end

function _M.run(phase)
  return handler[phase](handler, conf())
end

return _M
