#!/usr/bin/env bash
# bench-stream.sh: the streaming benchmark of issue 6 (`make bench-stream`).
#
# Builds vajra, the floor (gnet) and baseline (net/http) reference servers
# and the instrument; starts each server pinned to CPU 0 with GOMAXPROCS=1;
# runs `vajra bench` pinned to CPU 1 against them, comparing vajra with each
# reference in alternating rounds (A B A B ...), for three workloads:
#
#   stream:     1,000 concurrent chat streams, 20 ms inter-token latency,
#               128 tokens each, include_usage, starts spread over 1 s
#   saturation: inter-token latency 0, 256 concurrent streams of 128 tokens
#   nonstream:  16-token non-streaming chat completions on 64 connections
#
# Results (text, JSON, HTML) go to bench/out/. Environment overrides:
#   WARMUP (4s) DURATION (10s) ROUNDS (3) PORT_BASE (18000)
#   MODEL (vajra-sim: the model `vajra serve --sim-*` serves; the
#   reference servers accept any)
#   VAJRA_SERVE_ARGS (extra flags for `vajra serve`), SKIP_VAJRA=1
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=bench/out
mkdir -p "$out/bin"
rm -f "$out"/*-vs-*.txt "$out"/*-vs-*.json "$out"/*-vs-*.html

WARMUP=${WARMUP:-4s}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
MODEL=${MODEL:-vajra-sim}
PORT_BASE=${PORT_BASE:-18000}
port_vajra=$PORT_BASE
port_floor=$((PORT_BASE + 1))
port_baseline=$((PORT_BASE + 2))

# 1,000 streams need 1,000+ descriptors on each side: raise the soft limit
# to the hard one.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || ulimit -n 65536 2>/dev/null || true
echo "open files limit: $(ulimit -n)"

echo "building..."
go build -o "$out/bin/floor" ./bench/floor
go build -o "$out/bin/baseline" ./bench/baseline
go build -o bin/vajra ./cmd/vajra
have_vajra=1
if [[ "${SKIP_VAJRA:-0}" == 1 ]]; then
	have_vajra=0
fi
# The instrument is `vajra bench`.
bench=(bin/vajra bench)

pin_server=()
pin_client=()
if command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then
	pin_server=(taskset -c 0)
	pin_client=(taskset -c 1)
else
	echo "WARNING: taskset or a second CPU is missing: not pinning" >&2
fi

pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	pids=()
}
trap cleanup EXIT

wait_port() { # port name
	for _ in $(seq 1 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	echo "ERROR: $2 did not open port $1" >&2
	return 1
}

declare -A pid_of
start_servers() { # itl
	local itl=$1
	cleanup
	GOMAXPROCS=1 "${pin_server[@]}" "$out/bin/floor" -port "$port_floor" -itl "$itl" 2>"$out/floor.log" &
	pids+=($!)
	pid_of[floor]=$!
	GOMAXPROCS=1 "${pin_server[@]}" "$out/bin/baseline" -port "$port_baseline" -itl "$itl" 2>"$out/baseline.log" &
	pids+=($!)
	pid_of[baseline]=$!
	wait_port "$port_floor" floor
	wait_port "$port_baseline" baseline
	if [[ $have_vajra == 1 ]]; then
		# shellcheck disable=SC2086
		GOMAXPROCS=1 "${pin_server[@]}" bin/vajra serve --port "$port_vajra" --sim-itl "$itl" \
			--max-num-seqs 4096 ${VAJRA_SERVE_ARGS:-} >"$out/vajra.log" 2>&1 &
		pids+=($!)
		pid_of[vajra]=$!
		wait_port "$port_vajra" vajra
	fi
}

port_of() {
	case $1 in
	vajra) echo "$port_vajra" ;;
	floor) echo "$port_floor" ;;
	baseline) echo "$port_baseline" ;;
	esac
}

# compare scenario A B itl args...: A is the reference, B the subject.
compare() {
	local scenario=$1 a=$2 b=$3 itl=$4
	shift 4
	local name="$scenario-$b-vs-$a"
	echo
	echo "=== $scenario: $b vs $a"
	GOMAXPROCS=1 "${pin_client[@]}" "${bench[@]}" \
		-url "http://127.0.0.1:$(port_of "$a")" -label "$a" -server-pid "${pid_of[$a]}" \
		-compare "http://127.0.0.1:$(port_of "$b")" -compare-label "$b" -compare-pid "${pid_of[$b]}" \
		-model "$MODEL" -rounds "$ROUNDS" -warmup "$WARMUP" -duration "$DURATION" -itl "$itl" -quiet \
		-out "$out/$name.json" -html "$out/$name.html" "$@" | tee "$out/$name.txt" || true
}

run_scenario() { # scenario itl args...
	local scenario=$1 itl=$2
	shift 2
	start_servers "$itl"
	if [[ $have_vajra == 1 ]]; then
		compare "$scenario" floor vajra "$itl" "$@"
		compare "$scenario" baseline vajra "$itl" "$@"
	else
		compare "$scenario" floor baseline "$itl" "$@"
	fi
}

run_scenario stream 20ms -c 1000 -ramp 1s -max-tokens 128 -prompt-tokens 128
run_scenario saturation 0 -c 256 -max-tokens 128 -prompt-tokens 128
run_scenario nonstream 0 -c 64 -stream=false -max-tokens 16 -prompt-tokens 128
cleanup

echo
echo "=== summary: B/A ratios (median of rounds); A = reference, B = subject"
for f in "$out"/*-vs-*.txt; do
	echo "--- $(basename "$f" .txt)"
	grep -E '^(tokens/s|requests/s|ttft p99|gap p99 |gap-itl p99|server cpu/token|server cpu/request|server peak RSS|errors)' "$f" || true
done
echo "reports: $out/*.html"
