#!/usr/bin/env bash
# What the pull path costs in bytes per series per minute: the collector's demo bot (--demo),
# scraped by a Prometheus agent (agent.yml, its own job only, every 5 s) that remote-writes to a
# central Prometheus (central.yml). Prints, over MINUTES after a minute's warm-up:
#   - the scrape: the body the agent gets (gzipped, as Prometheus asks), sampled by curl with
#     the agent's own Accept header every scrape interval, and its uncompressed size;
#   - the remote write: the agent's prometheus_remote_storage_bytes_total (snappy-compressed
#     protobuf, what goes on the wire) and metadata bytes;
#   - the series the centre holds for job="ringside".
#
#   tools/prometheus/measure-pull.sh native  [MINUTES]   # the recipe: --native-histograms 5, agent,native-histograms
#   tools/prometheus/measure-pull.sh classic [MINUTES]   # 1-2-5 buckets: no native histograms anywhere
#
# Needs prometheus (2.42, Debian's), curl, and a release collector (swift build -c release;
# RINGSIDE_COLLECTOR overrides its path). Uses ports 19464, 19090 and 19091 on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/../.."

mode="${1:-native}"
minutes="${2:-5}"
collector="${RINGSIDE_COLLECTOR:-.build/release/ringside-collector}"
case "$mode" in
  native) collector_flags=(--native-histograms 5); agent_features=agent,native-histograms
    accept='application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1' ;;
  classic) collector_flags=(); agent_features=agent
    accept='application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1' ;;
  *) echo "usage: $0 native|classic [MINUTES]" >&2; exit 2 ;;
esac
[[ -x "$collector" ]] || { echo "$collector is not built: swift build -c release" >&2; exit 1; }

work="$(mktemp -d /tmp/ringside-measure.XXXXXX)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/rings"
"$collector" --demo --dir "$work/rings" --listen 127.0.0.1:19464 "${collector_flags[@]}" >"$work/collector.out" 2>&1 &
pids+=($!)
sed -e 's|  - ringside-rules.yml|  - '"$PWD"'/tools/prometheus/ringside-rules.yml|' \
  -e 's|targets: \["127.0.0.1:9093"\]|targets: []|' tools/prometheus/central.yml >"$work/central.yml"
prometheus --config.file="$work/central.yml" --storage.tsdb.path="$work/central" --web.listen-address=127.0.0.1:19090 \
  --web.enable-remote-write-receiver --enable-feature=native-histograms --log.level=warn 2>"$work/central.log" &
pids+=($!)
# The shipped agent.yml without its own job, so that every byte counted is the collector's.
sed -e 's|127.0.0.1:9464|127.0.0.1:19464|' -e 's|http://prometheus-central.example:9090|http://127.0.0.1:19090|' \
  -e '/- job_name: prometheus-agent/,/host: trading-1/d' tools/prometheus/agent.yml >"$work/agent.yml"
prometheus --enable-feature="$agent_features" --config.file="$work/agent.yml" --storage.agent.path="$work/agent" \
  --web.listen-address=127.0.0.1:19091 --log.level=warn 2>"$work/agent.log" &
pids+=($!)

metric() { # metric NAME: the agent's value of NAME (summed over its labels)
  curl -s http://127.0.0.1:19091/metrics | awk -v name="$1" '$1 == name || index($1, name "{") == 1 { sum += $2 } END { printf "%.0f\n", sum }'
}
query() { # query PROMQL: the centre's one value
  curl -s --data-urlencode "query=$1" http://127.0.0.1:19090/api/v1/query | sed -n 's/.*"value":\[[0-9.]*,"\([^"]*\)"\].*/\1/p'
}

echo "warming up for a minute ($mode)" >&2
sleep 60
bytes0=$(metric prometheus_remote_storage_bytes_total)
meta0=$(metric prometheus_remote_storage_metadata_bytes_total)
samples0=$(metric prometheus_remote_storage_samples_total)
histograms0=$(metric prometheus_remote_storage_histograms_total)
start=$(date +%s.%N)
wire=0 plain=0 scrapes=0
end=$(($(date +%s) + minutes * 60))
while (($(date +%s) < end)); do
  wire=$((wire + $(curl -s -H "Accept: $accept" -H 'Accept-Encoding: gzip' http://127.0.0.1:19464/metrics | wc -c)))
  plain=$((plain + $(curl -s -H "Accept: $accept" http://127.0.0.1:19464/metrics | wc -c)))
  scrapes=$((scrapes + 1))
  sleep 5
done
elapsed=$(echo "$(date +%s.%N) - $start" | bc -l)
bytes=$(($(metric prometheus_remote_storage_bytes_total) - bytes0))
meta=$(($(metric prometheus_remote_storage_metadata_bytes_total) - meta0))
samples=$(($(metric prometheus_remote_storage_samples_total) - samples0))
histograms=$(($(metric prometheus_remote_storage_histograms_total) - histograms0))
series=$(query 'count({job="ringside"})')
native=$(curl -s --data-urlencode 'query={job="ringside"}' http://127.0.0.1:19090/api/v1/query | { grep -o '"histogram":' || true; } | wc -l)
per_minute=$(echo "60 / $elapsed" | bc -l)

printf 'mode %s, %.1f minutes, scrape every 5 s (%s scrapes sampled)\n' "$mode" "$(echo "$elapsed / 60" | bc -l)" "$scrapes"
printf 'series at the centre (job="ringside"): %s, of which native histograms: %s\n' "$series" "$native"
printf 'samples written: %s floats, %s native histograms\n' "$samples" "$histograms"
printf 'scrape body: %.0f bytes gzipped (%.0f plain) a scrape: %.1f bytes per series per minute gzipped (%.1f plain)\n' \
  "$(echo "$wire / $scrapes" | bc -l)" "$(echo "$plain / $scrapes" | bc -l)" \
  "$(echo "$wire / $scrapes * 12 / $series" | bc -l)" "$(echo "$plain / $scrapes * 12 / $series" | bc -l)"
printf 'remote write: %.0f bytes a minute (+ %.0f of metadata): %.1f bytes per series per minute (%.1f with metadata)\n' \
  "$(echo "$bytes * $per_minute" | bc -l)" "$(echo "$meta * $per_minute" | bc -l)" \
  "$(echo "$bytes * $per_minute / $series" | bc -l)" "$(echo "($bytes + $meta) * $per_minute / $series" | bc -l)"
