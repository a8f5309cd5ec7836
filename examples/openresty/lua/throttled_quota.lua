-- throttled_quota: a rate limiter for nginx-lua/OpenResty that decides on
-- the gateway, from state that all the nginx workers share in a
-- lua_shared_dict, and asks throttled once per batch or per sync interval
-- instead of once per request (docs/gateways.md, docs/leases.md).
--
-- Two ways of doing it, as package client's Lease and TwoLayer modes:
--
--   lease, lazy  QUOTA.LEASE takes a batch of the limit's units; the workers
--                spend it with an atomic incr on the dict; when a batch runs
--                low one worker leases the next in the background
--                (ngx.timer.at), so requests wait for throttled only when
--                there is no batch at all (a key's first request, or after a
--                refusal). A batch that is spent, expires or is replaced is
--                ended once with QUOTA.RETURN of what it admitted. "lease"
--                is eager (throttled charges the grant at once: never over
--                the limit); "lazy" charges what was used at the return (over
--                by at most gateways x batch).
--   two-layer    a local counter per key and fixed window (FWC only), sent
--                to throttled with INCRBY once per sync interval by one
--                worker's timer; each gateway decides from the total it last
--                learned (over by at most gateways x what each admits in an
--                interval).
--
-- In nginx.conf:
--
--   lua_shared_dict throttled_quota 10m;   -- the name is fixed
--   init_worker_by_lua_block { require("throttled_quota").init_worker() }
--
-- and in a location:
--
--   set $quota_key    "lease:$throttle_client";  # the limit's key
--   set $quota_limit  "FWC 100 60";   # alg and params as QUOTA.LEASE takes them
--                                     # (CL, FWC, SWL, SWC, TB, LB; "MS" last for ms)
--   set $quota_mode   lease;          # lease (default), lazy or two-layer
--   set $quota_batch  10;             # lease: the most units a lease asks for
--   set $quota_share  50;             # lease: 1..100 (% of what remains, default
--                                     #   100) or "dynamic" (from recent use)
--   set $quota_ttl    10000;          # lease: its TTL in ms (default 10000)
--   set $quota_refresh_at 5;          # lease: lease the next batch when this many
--                                     #   are left (default half the batch)
--   set $quota_holder "gw1";          # lease: this gateway's name (default the host's)
--   set $quota_policy "default";      # the name in the RateLimit headers
--   set $throttle_fail_open off;      # no decision from throttled: on passes, off 503
--   access_by_lua_block        { require("throttled_quota").access() }
--   header_filter_by_lua_block { require("throttled_quota").header_filter() }
--
-- Allowed requests go on; refused ones get 429 with Retry-After. Both carry
-- X-RateLimit-Limit/-Remaining/-Reset and the IETF draft's RateLimit-Policy
-- and RateLimit, from what the gateway knows (the store's remaining at the
-- last grant or sync, plus or minus what it holds locally).
--
-- When throttled gives no decision (unreachable, or an error reply such as
-- NOPERM), the error is logged and $throttle_fail_open decides, as in
-- throttled_gateway: unset or "off" answers 503. Lease mode asks only when
-- no batch is left (a batch in hand is spent first: its units are already
-- charged); two-layer fails closed from the first failed sync until one
-- succeeds, and with "on" goes on deciding from its local count.

local conn = require "throttled_conn"

local ngx = ngx
local fmt = string.format
local tonumber = tonumber
local floor, ceil, min, max = math.floor, math.ceil, math.min, math.max

local _M = { _VERSION = "1.0" }

local DICT = "throttled_quota"

-- How many params each algorithm takes; the last one is its window or
-- period, which the RateLimit-Policy header gives as w.
local PARAMS = { CL = 3, FWC = 2, SWL = 2, SWC = 2, TB = 3, LB = 3 }

-- A batch is closed by adding CLOSED to its used counter: every incr after
-- that sees more than the grant and admits nothing, and the worker whose add
-- found the counter below CLOSED is the one (and only one) that returns it,
-- with what the counter held before (capped at the grant).
local CLOSED = 2 ^ 40

-- The lease's local life: it ends a fifth of its TTL before throttled's
-- end, so its return arrives while throttled still credits it.
local LOCAL_LIFE = 0.8

local function dict()
  local d = ngx.shared[DICT]
  if not d then
    return nil, "lua_shared_dict " .. DICT .. " is not declared"
  end
  return d
end

local function now_ms()
  return ngx.now() * 1000
end

local function uint(v)
  v = tonumber(v)
  if not v or v < 0 or v ~= floor(v) then
    return nil
  end
  return v
end

-- parse_limit reads "$quota_limit": alg, its params, and "MS" when the
-- times are milliseconds (not for CL).
local function parse_limit(s)
  local words = {}
  for w in (s or ""):gmatch("%S+") do
    words[#words + 1] = w
  end
  local alg = words[1] and words[1]:upper()
  local n = PARAMS[alg]
  if not n then
    return nil, "$quota_limit must start with CL, FWC, SWL, SWC, TB or LB"
  end
  local params = {}
  for i = 1, n do
    params[i] = uint(words[i + 1])
    if not params[i] then
      return nil, fmt("$quota_limit: %s takes %d whole numbers", alg, n)
    end
  end
  local ms = words[n + 2] ~= nil and words[n + 2]:upper() == "MS"
  if #words ~= n + 1 + (ms and 1 or 0) or (ms and alg == "CL") then
    return nil, "$quota_limit: " .. s .. ": too many words"
  end
  local window = params[n]
  return { alg = alg, params = params, ms = ms, window_ms = ms and window or window * 1000 }
end

-- config reads the location's settings.
local function config()
  local v = ngx.var
  local c = { key = v.quota_key, mode = v.quota_mode }
  if not c.key or c.key == "" then
    return nil, "set $quota_key"
  end
  if c.mode == nil or c.mode == "" then
    c.mode = "lease"
  end
  if c.mode ~= "lease" and c.mode ~= "lazy" and c.mode ~= "two-layer" then
    return nil, "$quota_mode must be lease, lazy or two-layer, not " .. c.mode
  end
  local limit, err = parse_limit(v.quota_limit)
  if not limit then
    return nil, err
  end
  c.limit = limit
  local policy = v.quota_policy
  -- sent as a quoted structured-field string: no characters to escape
  c.policy = policy and policy:match("^[%w%-_.:/]+$") and policy or "default"
  if c.mode == "two-layer" then
    if limit.alg ~= "FWC" then
      return nil, "two-layer counts fixed windows: $quota_limit must be FWC, not " .. limit.alg
    end
    return c
  end
  c.batch = uint(v.quota_batch)
  if not c.batch or c.batch < 1 then
    return nil, "$quota_batch must be a whole number of at least 1"
  end
  c.ttl = uint(v.quota_ttl ~= "" and v.quota_ttl or 10000)
  if not c.ttl or c.ttl < 1 or c.ttl > 86400000 then
    return nil, "$quota_ttl must be 1 to 86400000 (ms)"
  end
  local refresh = v.quota_refresh_at
  c.refresh_at = (refresh == nil or refresh == "") and ceil(c.batch / 2) or uint(refresh)
  if not c.refresh_at then
    return nil, "$quota_refresh_at must be a whole number"
  end
  local share = v.quota_share
  if share == "dynamic" then
    c.share = "DYNAMIC"
  elseif share ~= nil and share ~= "" then
    c.share = uint(share)
    if not c.share or c.share < 1 or c.share > 100 then
      return nil, "$quota_share must be 1..100 or dynamic, not " .. share
    end
  end
  c.holder = v.quota_holder
  if c.holder == nil or c.holder == "" then
    c.holder = v.hostname
  end
  return c
end

-- call runs one command (throttled_conn.call), its error replies named by
-- the command.
local function call(cmd, ...)
  return conn.call(cmd:upper(), cmd, ...)
end

---------------------------------------------------------------------------
-- Lease mode.
--
-- Per limit key k the dict holds:
--   g:k        the current slot, a number (absent: 0)
--   b:k:<g>    slot g's batch, "id granted expires_ms" (a lease)
--   u:<id>     what the lease has admitted (incr; see CLOSED)
--   r:k        a lease is being asked for (one at a time; add with exptime)
--   e:k        throttled refused: refuse locally until this time (ms)
--   m:k        "limit remaining reset_at_ms" from the last grant, for headers
-- Slot g+1 holds the batch leased ahead while g is spent. Only the holder
-- of r:k writes a slot, and only the worker that closes slot g's batch
-- moves g:k on, so the workers agree without a lock on the request path.
---------------------------------------------------------------------------

local function batch_key(k, g)
  return "b:" .. k .. ":" .. g
end

local function batch_get(d, k, g)
  local s = d:get(batch_key(k, g))
  if not s then
    return nil
  end
  local id, granted, expires = s:match("^(%S+) (%d+) (%d+)$")
  return { id = id, granted = tonumber(granted), expires = tonumber(expires) }
end

local function return_lease(premature, id, used)
  local res, err = call("quota.return", id, used)
  if not res then
    -- Its units stay charged (eager) or its grant is charged at its TTL
    -- (lazy): never more than was granted.
    ngx.log(ngx.WARN, "throttled_quota: QUOTA.RETURN ", id, " ", used, ": ", err)
  end
end

-- close ends slot g's batch b, if no worker did yet: it stops every further
-- admission from it, moves the key to slot g+1 and returns the lease with
-- what it admitted: in the background, or (lazy: now) before the caller
-- leases again, so that its use is charged before the next grant is sized.
local function close(d, k, g, b, now)
  local u = d:incr("u:" .. b.id, CLOSED, 0)
  if not u or u >= 2 * CLOSED then
    return false -- another worker closed it
  end
  d:set("g:" .. k, g + 1)
  d:delete(batch_key(k, g))
  local used = min(u - CLOSED, b.granted)
  if now then
    return_lease(false, b.id, used)
    return true
  end
  local ok, err = ngx.timer.at(0, return_lease, b.id, used)
  if not ok then
    ngx.log(ngx.WARN, "throttled_quota: QUOTA.RETURN ", b.id, ": ", err)
  end
  return true
end

-- lock takes r:k: only its holder asks for a lease of k, or (lazy) closes
-- one.
local function lock(d, k)
  return d:add("r:" .. k, true, conn.timeout / 1000 * 2 + 1)
end

-- close_lazy closes a lazy batch under r:k, so that no worker leases while
-- its return is on the way. It returns false when r:k is taken.
local function close_lazy(d, k, g, b)
  if not lock(d, k) then
    return false
  end
  close(d, k, g, b, true)
  d:delete("r:" .. k)
  return true
end

-- expire closes slot g's batch at its local end if it is still there, so
-- that an idle key's unused units go back; premature (the worker is
-- exiting) closes it at once, so a graceful stop returns every batch.
local function expire(premature, k, g, id, lazy)
  local d = dict()
  local b = batch_get(d, k, g)
  if not b or b.id ~= id then
    return
  end
  if not lazy or premature then
    close(d, k, g, b, premature)
  elseif not close_lazy(d, k, g, b) then
    ngx.timer.at(0.01, expire, k, g, id, lazy) -- a lease is in flight: soon
  end
end

-- lease asks throttled for a batch for slot, unless the slot is filled or
-- was passed meanwhile. The caller holds r:k. It returns true, or nil and
-- an error when throttled gave no answer.
local function lease(d, k, c, slot)
  local g = d:get("g:" .. k) or 0
  if (g ~= slot and g ~= slot - 1) or d:get(batch_key(k, slot)) then
    return true
  end
  local l = c.limit
  local args = { k, l.alg }
  for _, p in ipairs(l.params) do
    args[#args + 1] = p
  end
  args[#args + 1] = c.batch
  if l.ms then
    args[#args + 1] = "MS"
  end
  args[#args + 1] = "HOLDER"
  args[#args + 1] = c.holder
  args[#args + 1] = "TTL"
  args[#args + 1] = c.ttl
  if c.share then
    args[#args + 1] = "SHARE"
    args[#args + 1] = c.share
  end
  if c.mode == "lazy" then
    args[#args + 1] = "LAZY"
  end
  local start = now_ms()
  local res, err = call("quota.lease", unpack(args))
  if not res then
    return nil, err
  end
  if type(res) ~= "table" or #res ~= 7 then
    return nil, "QUOTA.LEASE " .. k .. ": not a QUOTA.LEASE reply"
  end
  for i = 2, 7 do
    if type(res[i]) ~= "number" then
      return nil, "QUOTA.LEASE " .. k .. ": not a QUOTA.LEASE reply"
    end
  end
  local id, granted, limit, remaining, retry, reset, ttl = unpack(res)
  local keep = c.ttl * 2 / 1000 -- seconds the dict keeps a lease's entries
  d:set("m:" .. k, fmt("%d %d %d", limit, remaining, start + reset), max(keep, reset / 1000))
  if id == ngx.null or granted == 0 then
    local until_ms = start + max(retry, 1)
    if retry < 0 then -- never fits now: refuse until the limit is whole again
      until_ms = start + max(reset, 1)
    end
    d:set("e:" .. k, until_ms, (until_ms - start) / 1000)
    return true
  end
  local life = floor(ttl * LOCAL_LIFE)
  d:set("u:" .. id, 0, keep)
  d:set(batch_key(k, slot), fmt("%s %d %d", id, granted, start + life), keep)
  local ok, err = ngx.timer.at(life / 1000, expire, k, slot, id, c.mode == "lazy")
  if not ok then
    ngx.log(ngx.WARN, "throttled_quota: no timer to end lease ", id, ": ", err)
  end
  return true
end

local function refresh_timer(premature, k, c, slot)
  local d = dict()
  if not premature then
    local ok, err = lease(d, k, c, slot)
    if not ok then
      -- The request path asks again when the batch is spent.
      ngx.log(ngx.WARN, "throttled_quota: lease ahead for ", k, ": ", err)
    end
  end
  d:delete("r:" .. k)
end

-- refresh leases slot g+1 in the background, unless it is there or a lease
-- is in flight.
local function refresh(d, k, c, g)
  if d:get(batch_key(k, g + 1)) or d:get("e:" .. k) or not lock(d, k) then
    return
  end
  local ok, err = ngx.timer.at(0, refresh_timer, k, c, g + 1)
  if not ok then
    d:delete("r:" .. k)
    ngx.log(ngx.WARN, "throttled_quota: no timer to lease ahead: ", err)
  end
end

-- state is what the headers say: the store's remaining at the last grant
-- plus what the batches hold.
local function state(d, k, c, g, allowed, retry_ms)
  local m = d:get("m:" .. k) or "0 0 0"
  local limit, remaining, reset_at = m:match("^(%d+) (%d+) (%d+)$")
  remaining = tonumber(remaining)
  for slot = g, g + 1 do
    local b = batch_get(d, k, slot)
    if b then
      remaining = remaining + max(b.granted - min(d:get("u:" .. b.id) or 0, b.granted), 0)
    end
  end
  limit = tonumber(limit)
  return {
    allowed = allowed,
    limit = limit,
    remaining = min(remaining, limit),
    reset_ms = max(tonumber(reset_at) - now_ms(), 0),
    retry_ms = retry_ms,
  }
end

-- admit_lease spends one unit of k's batch, leasing one first when there is
-- none. It returns the decision, or nil and an error.
local function admit_lease(d, c)
  local k = c.key
  local deadline = now_ms() + conn.timeout * 2
  local waited = false -- for throttled's answer on the request path
  while true do
    local now = now_ms()
    local g = d:get("g:" .. k) or 0
    local b = batch_get(d, k, g)
    if b then
      if now < b.expires then
        local u = d:incr("u:" .. b.id, 1, 0)
        if u <= b.granted then
          -- lazy leases no batch ahead: each gateway has one uncharged
          if c.mode ~= "lazy" and b.granted - u <= c.refresh_at then
            refresh(d, k, c, g)
          end
          local st = state(d, k, c, g, true)
          st.waited = waited
          return st
        end
      end
      -- spent or expired: end it and go on with the next slot
      local closed
      if c.mode == "lazy" then
        closed = close_lazy(d, k, g, b)
      else
        closed = close(d, k, g, b)
      end
      if not closed then
        ngx.sleep(0.001) -- another worker is closing it or leasing
      end
    else
      local until_ms = d:get("e:" .. k)
      if until_ms and now < until_ms then
        return state(d, k, c, g, false, until_ms - now)
      end
      waited = true
      if lock(d, k) then
        local ok, err = lease(d, k, c, g)
        d:delete("r:" .. k)
        if not ok then
          return nil, err
        end
      else
        ngx.sleep(0.001) -- another worker is asking: wait for its batch
      end
    end
    if now_ms() > deadline then
      return nil, "QUOTA.LEASE " .. k .. ": no batch after " .. conn.timeout * 2 .. " ms"
    end
  end
end

---------------------------------------------------------------------------
-- Two-layer mode (client/twolayer.go's): per store counter
-- ck = "<key>:<window start, Unix ms>" the dict holds
--   t:n:ck   the window's end (ms); added once, when ck is first seen,
--            which also puts ck on the list t:active that the sync walks
--   t:u:ck   global + pending: what the gateway counts in the window
--   t:p:ck   pending: admitted here, not sent yet
--   t:g:ck   global: the store's total at the last sync
-- and t:err, the last sync's error while it failed.
---------------------------------------------------------------------------

-- A store counter outlives its window by this much (the article's 2 s),
-- so that a late sync still finds it.
local GRACE_MS = 2000

local sync_interval -- seconds; set by init_worker

local function admit_two_layer(d, c, fail_open)
  if not sync_interval then
    return nil, "two-layer needs init_worker_by_lua_block { require(\"throttled_quota\").init_worker() }"
  end
  local err = d:get("t:err")
  if err and not fail_open then
    return nil, err
  end
  local now = now_ms()
  local period = c.limit.window_ms
  local start = now - now % period
  local ends = start + period
  local ck = fmt("%s:%d", c.key, start)
  local keep = (ends - now + GRACE_MS) / 1000 + 2 * sync_interval + 60
  if d:add("t:n:" .. ck, ends, keep) then
    d:lpush("t:active", ck)
  end
  local limit = c.limit.params[1]
  local u = d:incr("t:u:" .. ck, 1, 0, keep)
  local st = { limit = limit, reset_ms = ends - now }
  if u > limit then
    d:incr("t:u:" .. ck, -1)
    st.allowed, st.remaining, st.retry_ms = false, 0, ends - now
    return st
  end
  d:incr("t:p:" .. ck, 1, 0, keep)
  st.allowed, st.remaining = true, limit - u
  return st
end

-- sync sends every counter's pending count with INCRBY (0 for a counter of
-- the current window with nothing pending, to learn the others' counts)
-- and sets its expiry, one pipeline for all. A count whose INCRBY failed
-- stays pending for the next sync; one whose reply was lost after throttled
-- applied it is sent again, which can only over-count (refuse early).
local function sync(d)
  local now = now_ms()
  local cks = {}
  for _ = 1, d:llen("t:active") or 0 do
    local ck = d:rpop("t:active")
    if not ck then
      break
    end
    local ends = d:get("t:n:" .. ck)
    local pending = d:get("t:p:" .. ck) or 0
    if ends and (pending > 0 or now < ends) then
      cks[#cks + 1] = { ck = ck, ends = ends, sent = pending }
    elseif ends then
      d:delete("t:n:" .. ck) -- an ended window with nothing to send
    end
  end
  if #cks == 0 then
    return true
  end
  local red, err = conn.connect()
  local res
  if red then
    red:init_pipeline(2 * #cks)
    for _, s in ipairs(cks) do
      red:incrby(s.ck, s.sent)
      red:pexpireat(s.ck, s.ends + GRACE_MS)
    end
    res, err = red:commit_pipeline()
    if res then
      red:set_keepalive(10000, 100)
    else
      red:close()
    end
  end
  for i, s in ipairs(cks) do
    local total = res and res[2 * i - 1]
    if type(total) == "number" then
      local keep = (s.ends - now + GRACE_MS) / 1000 + 2 * sync_interval + 60
      local was = d:get("t:g:" .. s.ck) or 0
      d:incr("t:p:" .. s.ck, -s.sent, 0, keep)
      d:set("t:g:" .. s.ck, total, keep)
      -- global + pending, moved by the same steps
      d:incr("t:u:" .. s.ck, total - was - s.sent, 0, keep)
    elseif res and not err then
      err = "INCRBY " .. s.ck .. ": " .. tostring(type(total) == "table" and total[2] or total)
    end
    local expiry = res and res[2 * i]
    if type(expiry) == "table" and not err then
      -- sent, but the counter would never expire: an error all the same
      err = "PEXPIREAT " .. s.ck .. ": " .. tostring(expiry[2])
    end
    d:lpush("t:active", s.ck)
  end
  if err then
    d:set("t:err", err)
    return nil, err
  end
  d:delete("t:err")
  return true
end

-- sync_timer runs in every worker; t:tick lets one of them sync per
-- interval. On exit (premature) each worker syncs what is pending.
local function sync_timer(premature)
  local d = dict()
  if not premature and not d:add("t:tick", true, sync_interval * 0.9) then
    return
  end
  if not d:add("t:lock", true, conn.timeout / 1000 * 2 + 1) then
    return -- a sync is running
  end
  local ok, err = sync(d)
  d:delete("t:lock")
  if not ok then
    ngx.log(ngx.ERR, "throttled_quota: sync: ", err)
  end
end

-- init_worker starts the two-layer sync timer. opts.sync_interval is in
-- seconds (default 1). Call it from init_worker_by_lua.
function _M.init_worker(opts)
  local d, err = dict()
  if not d then
    ngx.log(ngx.ERR, "throttled_quota: ", err)
    return
  end
  sync_interval = opts and opts.sync_interval or 1
  local ok, err = ngx.timer.every(sync_interval, sync_timer)
  if not ok then
    ngx.log(ngx.ERR, "throttled_quota: no sync timer: ", err)
  end
end

-- sync sends the two-layer counts now (what the timer does every
-- interval), for a location that flushes on demand. It returns true, or
-- nil and an error.
function _M.sync()
  local d, err = dict()
  if not d then
    return nil, err
  end
  if not d:add("t:lock", true, conn.timeout / 1000 * 2 + 1) then
    return nil, "a sync is running"
  end
  local ok, err = sync(d)
  d:delete("t:lock")
  return ok, err
end

-- access decides the request. Call it from access_by_lua.
function _M.access()
  local d, err = dict()
  local c
  if d then
    c, err = config()
  end
  local fail_open, ferr = conn.fail_open()
  err = err or ferr
  if err then
    ngx.log(ngx.ERR, "throttled_quota: ", err)
    return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
  end
  local st
  if c.mode == "two-layer" then
    st, err = admit_two_layer(d, c, fail_open)
  else
    st, err = admit_lease(d, c)
  end
  if not st then
    return conn.no_decision("throttled_quota", err, fail_open)
  end
  st.policy, st.window_ms = c.policy, c.limit.window_ms
  ngx.ctx.throttled_quota = st
  if not st.allowed then
    return conn.too_many(ceil(st.retry_ms / 1000))
  end
end

-- header_filter adds the rate-limit headers to the response, the
-- upstream's or the 429. Call it from header_filter_by_lua.
function _M.header_filter()
  local st = ngx.ctx.throttled_quota
  if not st then
    return
  end
  local reset = ceil(st.reset_ms / 1000)
  ngx.header["X-RateLimit-Limit"] = st.limit
  ngx.header["X-RateLimit-Remaining"] = st.remaining
  ngx.header["X-RateLimit-Reset"] = reset
  ngx.header["RateLimit-Policy"] = fmt('"%s";q=%d;w=%d', st.policy, st.limit, ceil(st.window_ms / 1000))
  ngx.header["RateLimit"] = fmt('"%s";r=%d;t=%d', st.policy, st.remaining, reset)
end

return _M
