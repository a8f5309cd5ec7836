-- The throttled-policy plugin's configuration (see handler.lua). Plain
-- field definitions, without kong.db.schema.typedefs, so the compat test's
-- PDK shim can read the defaults from this very file.
return {
  name = "throttled-policy",
  fields = {
    { config = {
        type = "record",
        fields = {
          { host = { type = "string", required = true, default = "127.0.0.1" } },
          { port = { type = "integer", required = true, default = 6379, between = { 1, 65535 } } },
          { username = { type = "string" } },
          { password = { type = "string", referenceable = true } },
          { database = { type = "integer", required = true, default = 0 } },
          { timeout = { type = "integer", required = true, default = 1000, gt = 0 } },
          -- The tenant: the value of this request header, when set.
          { tenant_header = { type = "string" } },
          -- When throttled gives no decision: false (the default) answers
          -- 503, true lets the request through.
          { fault_tolerant = { type = "boolean", required = true, default = false } },
        },
    } },
  },
}
