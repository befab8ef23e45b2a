-- wrk script for closer's intake benchmark: POSTs one real webhook payload,
-- signed once (the body never changes), with a unique X-GitHub-Delivery per
-- request so every request is a new delivery that must be stored.
local body_file = os.getenv("BENCH_BODY")
local signature = os.getenv("BENCH_SIGNATURE")
local run = os.getenv("BENCH_RUN") or "run"

local f = assert(io.open(body_file, "rb"))
local body = f:read("*a")
f:close()

local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

local counter = 0
function request()
  counter = counter + 1
  local headers = {
    ["Content-Type"] = "application/json",
    ["X-GitHub-Event"] = "issues",
    ["X-GitHub-Delivery"] = string.format("%s-%d-%d", run, tid, counter),
    ["X-Hub-Signature-256"] = signature,
  }
  return wrk.format("POST", "/webhooks", headers, body)
end
