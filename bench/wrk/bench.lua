-- The one wrk script of bench/run. It reads what to send from the environment, so that every
-- HTTP/1.1 scenario is this file with other settings:
--   BENCH_METHOD   GET (default) or POST
--   BENCH_PATH     the path; "{id}" in it (or in BENCH_BODY) is replaced by user ids 1..BENCH_IDS in turn
--   BENCH_BODY     request body, sent with Content-Type: application/json
--   BENCH_IDS      how many user ids to cycle through (default 0: the path and body as they are)
--   BENCH_ID_STEP  the distance between those ids (default 1: ids 1..BENCH_IDS; n: n, 2n, ... BENCH_IDS*n)
--                  "{seq}" in BENCH_BODY (without BENCH_IDS) is replaced by a value no other request of
--                  the server's life has: the thread, the second the thread started, and a counter
--   BENCH_API_KEY  sent as x-api-key when set
--   BENCH_STATUS   "1" counts answers by status class (2xx, 4xx, 5xx, other), at some cost to wrk
-- When it is done it prints one line that bench/run reads:
--   BENCH requests=N duration_us=N p50_us=N p99_us=N errors=N timeouts=N non2xx3xx=N [s2xx=N s4xx=N s5xx=N sother=N]

local method = os.getenv("BENCH_METHOD") or "GET"
local path = os.getenv("BENCH_PATH") or "/"
local body = os.getenv("BENCH_BODY")
local ids = tonumber(os.getenv("BENCH_IDS") or "0")
local step = tonumber(os.getenv("BENCH_ID_STEP") or "1")
local key = os.getenv("BENCH_API_KEY")
local count_status = os.getenv("BENCH_STATUS") == "1"

local headers = {}
if body then headers["Content-Type"] = "application/json" end
if key then headers["x-api-key"] = key end

local function with_id(text, id)
  if text == nil then return nil end
  return (text:gsub("{id}", tostring(id)))
end

-- Each thread's number, set by setup() before the thread starts.
tid = tid or 0

if ids == 0 and body and body:find("{seq}", 1, true) then
  -- Unique values (a user name, an email) for every create, also across the warm-up and the
  -- measured run, which are two wrk runs against one server.
  local prefix, n = "", 0
  function init(args)
    prefix = string.format("%d-%d-", tid, os.time())
  end
  function request()
    n = n + 1
    return wrk.format(method, path, headers, (body:gsub("{seq}", prefix .. n)))
  end
elseif ids > 0 then
  -- Every request is formatted once, up front; request() only hands them out, so that wrk spends
  -- as little as it can per request.
  local requests, n = {}, 0
  function init(args)
    for id = 1, ids do
      requests[id] = wrk.format(method, with_id(path, id * step), headers, with_id(body, id * step))
    end
  end
  function request()
    n = n % ids + 1
    return requests[n]
  end
else
  wrk.method, wrk.path, wrk.body = method, path, body
  for k, v in pairs(headers) do wrk.headers[k] = v end
end

-- Per-thread status counts, summed in done() (each wrk thread has its own Lua state).
local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

if count_status then
  s2xx, s4xx, s5xx, sother = 0, 0, 0, 0
  function response(status, hdrs, b)
    if status >= 200 and status < 300 then s2xx = s2xx + 1
    elseif status >= 400 and status < 500 then s4xx = s4xx + 1
    elseif status >= 500 and status < 600 then s5xx = s5xx + 1
    else sother = sother + 1 end
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  local line = string.format("BENCH requests=%d duration_us=%d p50_us=%d p99_us=%d errors=%d timeouts=%d non2xx3xx=%d",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write, e.timeout, e.status)
  if count_status then
    local c = { s2xx = 0, s4xx = 0, s5xx = 0, sother = 0 }
    for _, t in ipairs(threads) do
      for k in pairs(c) do c[k] = c[k] + (t:get(k) or 0) end
    end
    line = line .. string.format(" s2xx=%d s4xx=%d s5xx=%d sother=%d", c.s2xx, c.s4xx, c.s5xx, c.sother)
  end
  io.write(line .. "\n")
end
