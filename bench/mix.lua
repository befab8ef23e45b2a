-- wrk script for bench/compare.sh: cycles through the request slots of
-- schedule.tsv (bench/mix.py), each a pre-signed real payload, with a unique
-- X-GitHub-Delivery per request. A TRIGGER slot takes the next payload of
-- triggers.tsv (a new issue each time; wrk threads take turns, so no two
-- threads send the same one).
local dir = os.getenv("BENCH_MIX")
local path = os.getenv("BENCH_PATH") or "/webhooks"
local run = os.getenv("BENCH_RUN") or "run"
local nthreads = tonumber(os.getenv("BENCH_THREADS") or "2")

local bodies = {}
local function entry(line)
  local event, signature, file = line:match("^(%S+)\t(%S+)\t(%S+)$")
  if not bodies[file] then
    local f = assert(io.open(file, "rb"))
    bodies[file] = f:read("*a")
    f:close()
  end
  return { event = event, signature = signature, body = bodies[file] }
end

local function read(name)
  local list = {}
  for line in io.lines(dir .. "/" .. name) do
    if line == "TRIGGER" then
      table.insert(list, "TRIGGER")
    else
      table.insert(list, entry(line))
    end
  end
  return list
end

local schedule = read("schedule.tsv")
local triggers = read("triggers.tsv")

local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

local counter = 0
local fired = 0
function request()
  counter = counter + 1
  local slot = schedule[(counter - 1) % #schedule + 1]
  if slot == "TRIGGER" then
    slot = triggers[(fired * nthreads + tid) % #triggers + 1]
    fired = fired + 1
  end
  local headers = {
    ["Content-Type"] = "application/json",
    ["X-GitHub-Event"] = slot.event,
    ["X-GitHub-Delivery"] = string.format("%s-%d-%d", run, tid, counter),
    ["X-Hub-Signature-256"] = slot.signature,
  }
  return wrk.format("POST", path, headers, slot.body)
end
