#!/usr/bin/env bash
# Takes docs/images/capture-timeline.png: the collector's capture timeline (/captures/view) of a
# real capture of the demo bot, photographed by headless Chromium, at the slowest TSLA fill with
# its exemplar in the side panel. The capture is the one docs/why-was-it-slow.md walks to: an SLO
# on TSLA's p99.9 marked `capture`, violated by the demo's bursts (600 ms of slow fills every 7 s);
# the third capture, 15 s in, is of the steady state (the first is of the bot's first second;
# captures are 5 s apart at most here, a minute by default). Needs a built ringside-collector (COLLECTOR=path,
# else the debug build's; the release build's writes captures faster), chromium, curl and python3.
# Usage: docs/images/capture-timeline.sh [PORT]
set -euo pipefail
cd "$(dirname "$0")/../.."
collector="${COLLECTOR:-$(swift build --show-bin-path)/ringside-collector}"
port="${1:-19470}"
[[ -x "$collector" ]] || { echo "no collector at $collector: swift build first, or COLLECTOR=path" >&2; exit 1; }
work="$(mktemp -d /tmp/ringside-screenshot.XXXXXX)"
mkdir "$work/rings"
"$collector" --demo --dir "$work/rings" --listen "127.0.0.1:$port" --capture-dir "$work/captures" --capture-min-interval 5s \
  --slo 'order_fill_latency{symbol="TSLA"}:p99.9<1ms@1s capture' >"$work/collector.log" 2>&1 &
collector_pid=$!
trap 'kill "$collector_pid" 2>/dev/null; wait "$collector_pid" 2>/dev/null; rm -rf "$work"' EXIT

# Until capture 3 is written: its trace file's name and its records.
trace="" records=0
for _ in $(seq 1 120); do
  sleep 1
  read -r trace records < <(curl -fsS "http://127.0.0.1:$port/api/captures" | python3 -c '
import json, sys
third = [c for c in json.load(sys.stdin)["captures"] if c["id"] == 3 and c["status"] == "written"]
print(*([f for f in third[0]["files"] if f.endswith(".trace.json")] + [third[0]["records"]]) if third else "")') || true
  [[ -n "$trace" ]] && break
done
[[ -n "$trace" && "${records:-0}" -gt 0 ]] || { echo "no capture with records within 2 minutes; the collector's log:" >&2; cat "$work/collector.log" >&2; exit 1; }

# ?slowest=NAME selects the slowest slice of that name, zoomed, its arguments in the side panel.
slowest='order_fill_latency%7Bsymbol%3D%22TSLA%22%7D'
chromium --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars --user-data-dir="$work/profile" \
  --window-size=1400,1500 --virtual-time-budget=30000 --screenshot="docs/images/capture-timeline.png" \
  "http://127.0.0.1:$port/captures/view?file=$trace&slowest=$slowest" 2>/dev/null
echo "docs/images/capture-timeline.png: $trace, $records records"
