#!/usr/bin/env bash
# Soak test: the release ringside-collector under N producer processes writing at full speed,
# for an hour by default. Every INTERVAL seconds it prints (and appends to a CSV) the collector's
# resident memory, its CPU use over the interval, and the rings' written, dropped and drained
# totals, so a leak or a slow drift shows as a trend. Not run in CI.
#
#   swift build -c release --product ringside-collector      # one --product a call: SwiftPM
#   swift build -c release --product ringside-test-producer  # builds only the last of several
#   tools/soak/soak.sh [--duration SECS] [--interval SECS] [--producers N] [--capacity RECORDS]
#                      [--rate RECORDS_PER_SEC] [--csv FILE] [--bin DIR]
#
# --rate 0 (the default) is full speed. Everything it starts (the collector, the producers, a
# ring directory under /dev/shm) is stopped and removed on exit, Ctrl-C included. The exit status
# is 1 if a process died, if written + dropped != attempts for a ring, or if the collector did not
# drain every written record at the end.
set -euo pipefail

duration=3600 interval=10 producers=8 capacity=65536 rate=0
csv="soak-$(date -u +%Y%m%dT%H%M%SZ).csv"
bin="$(cd "$(dirname "$0")/../.." && pwd)/.build/release"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --duration) duration="$2"; shift 2 ;;
        --interval) interval="$2"; shift 2 ;;
        --producers) producers="$2"; shift 2 ;;
        --capacity) capacity="$2"; shift 2 ;;
        --rate) rate="$2"; shift 2 ;;
        --csv) csv="$2"; shift 2 ;;
        --bin) bin="$2"; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "soak.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
    esac
done
for tool in ringside-collector ringside-test-producer; do
    [[ -x "$bin/$tool" ]] || { echo "soak.sh: $bin/$tool is missing; run: swift build -c release --product $tool" >&2; exit 2; }
done
command -v curl >/dev/null || { echo "soak.sh: needs curl" >&2; exit 2; }

dir="$(mktemp -d /dev/shm/ringside-soak.XXXXXX)"
collector_pid="" producer_pids=()
cleanup() {
    trap - EXIT INT TERM
    for pid in "${producer_pids[@]}" $collector_pid; do kill -TERM "$pid" 2>/dev/null || true; done
    sleep 0.5
    for pid in "${producer_pids[@]}" $collector_pid; do kill -KILL "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$bin/ringside-collector" --dir "$dir" --listen 127.0.0.1:0 2>"$dir/collector.log" &
collector_pid=$!
port=""
for _ in $(seq 100); do
    port="$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$dir/collector.log" | head -1)"
    [[ -n "$port" ]] && break
    sleep 0.1
done
[[ -n "$port" ]] || { echo "soak.sh: the collector did not start:" >&2; cat "$dir/collector.log" >&2; exit 1; }

for i in $(seq 0 $((producers - 1))); do
    "$bin/ringside-test-producer" blast --dir "$dir" --ring "soak-$i" --seconds "$duration" --rate "$rate" \
        --capacity "$capacity" >"$dir/producer-$i.out" 2>&1 &
    producer_pids+=($!)
done

# Sums a per-ring family of /metrics over every ring.
sum_family() { awk -v name="$1" '$1 ~ "^"name"\\{" { total += $2 } END { printf "%.0f", total }' "$dir/metrics"; }
ticks="$(getconf CLK_TCK)"
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$collector_pid/stat"; }

echo "elapsed_s,rss_kib,rss_anon_kib,cpu_percent,written,dropped,drained,backlog" >"$csv"
printf '%9s %10s %10s %6s %14s %14s %14s %9s\n' ELAPSED RSS_KIB ANON_KIB CPU% WRITTEN DROPPED DRAINED BACKLOG
start=$(date +%s) last_ticks=$(cpu_ticks) last_time=$start status=0
while true; do
    sleep "$interval"
    now=$(date +%s) elapsed=$((now - start))
    kill -0 "$collector_pid" 2>/dev/null || { echo "soak.sh: the collector died" >&2; status=1; break; }
    curl -sf "http://127.0.0.1:$port/metrics" -o "$dir/metrics" || { echo "soak.sh: /metrics failed" >&2; status=1; break; }
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$collector_pid/status")
    anon=$(awk '/^RssAnon:/ { print $2 }' "/proc/$collector_pid/status")
    ticks_now=$(cpu_ticks)
    cpu=$(awk -v d=$((ticks_now - last_ticks)) -v t="$ticks" -v s=$((now - last_time)) 'BEGIN { v = 0; if (s > 0) v = d / t / s * 100; printf "%.1f", v }')
    last_ticks=$ticks_now last_time=$now
    written=$(sum_family ringside_ring_records_written_total)
    dropped=$(sum_family ringside_ring_records_dropped_total)
    drained=$(sum_family ringside_ring_records_drained_total)
    backlog=$(sum_family ringside_ring_backlog_records)
    echo "$elapsed,$rss,$anon,$cpu,$written,$dropped,$drained,$backlog" >>"$csv"
    printf '%9s %10s %10s %6s %14s %14s %14s %9s\n' "$elapsed" "$rss" "$anon" "$cpu" "$written" "$dropped" "$drained" "$backlog"
    running=0
    for pid in "${producer_pids[@]}"; do kill -0 "$pid" 2>/dev/null && running=$((running + 1)); done
    [[ $running -eq 0 ]] && break
done

# The producers are done: check each one's counts, then that the collector drained everything.
for pid in "${producer_pids[@]}"; do wait "$pid" || { echo "soak.sh: producer $pid exited with $?" >&2; status=1; }; done
producer_pids=()
total_written=0
for i in $(seq 0 $((producers - 1))); do
    attempts="" written="" dropped=""
    read -r _ attempts _ written _ dropped _ _ < <(tail -n 1 "$dir/producer-$i.out") || true
    if [[ -z "${attempts:-}" || $attempts -ne $((written + dropped)) ]]; then
        echo "soak.sh: ring soak-$i: attempts ${attempts:-?} != written ${written:-?} + dropped ${dropped:-?}" >&2; status=1
    fi
    total_written=$((total_written + ${written:-0}))
done
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/metrics" -o "$dir/metrics" || true
    [[ "$(sum_family ringside_ring_records_drained_total)" == "$total_written" ]] && break
    sleep 0.2
done
drained=$(sum_family ringside_ring_records_drained_total)
echo "written $total_written, drained $drained, dropped $(sum_family ringside_ring_records_dropped_total); CSV in $csv"
[[ "$drained" == "$total_written" ]] || { echo "soak.sh: the collector drained $drained of $total_written" >&2; status=1; }
exit $status
