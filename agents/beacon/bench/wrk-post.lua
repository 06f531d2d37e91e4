-- wrk script for the beacon: POST /v1/events with a batch of 10 click events
-- per request, as the tracker sends after a few interactions.
--   wrk -t2 -c32 -d20s --latency -s agents/beacon/bench/wrk-post.lua http://127.0.0.1:8090
local events = {}
for i = 1, 10 do
  events[i] = string.format('{"type":"click","url":"https://shop.example/p/%d","title":"Product %d","anonymous_id":"a-%d","properties":{"button":"buy"}}', i, i, i)
end
wrk.method = "POST"
wrk.path = "/v1/events"
wrk.body = "[" .. table.concat(events, ",") .. "]"
wrk.headers["Content-Type"] = "application/json"
