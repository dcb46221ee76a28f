-- wrk script: POST an MCP tools/call "echo" and CHECK every response body.
--
-- Environment (set by bench/run.py):
--   BENCH_ERA      "2026" (stateless 2026-07-28 request), "2025" (2025-11-25 session request)
--   BENCH_SESSION  Mcp-Session-Id for "2025" (run.py does initialize + notifications/initialized first)
--   BENCH_TEXT     the text to echo; a good response is a 200 whose body carries it in a
--                  JSON-RPC result (plain JSON or an SSE "data: {...}" frame), with no "error" member
--   BENCH_OUT      where done() writes the results as JSON
-- Every request gets its own JSON-RPC id (stateful servers route responses by id).

local era = os.getenv("BENCH_ERA") or "2026"
local session = os.getenv("BENCH_SESSION")
local text = os.getenv("BENCH_TEXT") or "bench-echo-7f3a"
local out = os.getenv("BENCH_OUT")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"

local head, tail
if era == "2025" then
  wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
  if session and session ~= "" then wrk.headers["Mcp-Session-Id"] = session end
  head = '{"jsonrpc":"2.0","id":'
  tail = ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"' .. text .. '"}}}'
else
  wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
  wrk.headers["Mcp-Method"] = "tools/call"
  wrk.headers["Mcp-Name"] = "echo"
  head = '{"jsonrpc":"2.0","id":'
  tail = ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"' .. text .. '"},'
    .. '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
    .. '"io.modelcontextprotocol/clientCapabilities":{},'
    .. '"io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"1"}}}}'
end

local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

function init(args)
  counter = tid * 100000000
  good = 0
  bad = 0
  sample = ""
end

function request()
  counter = counter + 1
  return wrk.format(nil, nil, nil, head .. counter .. tail)
end

function response(status, headers, body)
  if status == 200 and body and body:find(text, 1, true) and body:find('"result"', 1, true)
      and not body:find('"error"', 1, true) then
    good = good + 1
  else
    bad = bad + 1
    if sample == "" then sample = tostring(status) .. " " .. string.sub(body or "", 1, 300) end
  end
end

local function jstr(s)
  return '"' .. s:gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\n', '\\n'):gsub('\r', '\\r'):gsub('[%c]', '') .. '"'
end

function done(summary, latency, requests)
  local g, b, s = 0, 0, ""
  for _, t in ipairs(threads) do
    g = g + t:get("good")
    b = b + t:get("bad")
    if s == "" then s = t:get("sample") or "" end
  end
  local e = summary.errors
  local parts = {
    '"requests":' .. summary.requests,
    '"duration_us":' .. summary.duration,
    '"good":' .. g,
    '"bad":' .. b,
    '"bad_sample":' .. jstr(s),
    '"errors":{"connect":' .. e.connect .. ',"read":' .. e.read .. ',"write":' .. e.write
      .. ',"status":' .. e.status .. ',"timeout":' .. e.timeout .. '}',
    '"latency_us":{"mean":' .. latency.mean .. ',"max":' .. latency.max
      .. ',"p50":' .. latency:percentile(50) .. ',"p90":' .. latency:percentile(90)
      .. ',"p99":' .. latency:percentile(99) .. '}',
  }
  local json = "{" .. table.concat(parts, ",") .. "}\n"
  if out and out ~= "" then
    local f = assert(io.open(out, "w"))
    f:write(json)
    f:close()
  else
    io.write(json)
  end
end
