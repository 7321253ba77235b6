#!/usr/bin/env bash
# bench-store.sh: the Responses API's store path, the memory store against
# Redis (issue "A fleet of Vajra nodes shares its Responses state through
# Redis").
#
# Starts a real redis-server on a loopback port (temporary directory,
# persistence off) and two Vajra servers on the embedded engine, both
# pinned to CPU 0: A with --response-store memory, B with --response-store
# redis://... . `vajra bench`, pinned to CPU 1, runs each workload against
# A and B in alternation (-compare, ROUNDS rounds) and prints both and the
# B/A ratios:
#
#   store:  non-streamed Responses requests with store: true (one save each)
#   chain:  the same chained by previous_response_id, CHAIN turns per
#           conversation (a read before each turn's engine start, a save at
#           its end, and a growing history)
#   stream: streamed, store: true, chained (the save before the last event)
#
# Redis runs on CPU 1 beside the client: the server's own cost is what A and
# B differ in, Redis's CPU is not counted as the server's.
#
# Everything is on loopback; every run is bounded (-duration, -max-time).
# Results go to bench/out/store/. Environment overrides:
#   CONCURRENCY (16) ROUNDS (3) WARMUP (2s) DURATION (10s) MAX_TOKENS (8)
#   PROMPT_TOKENS (32) CHAIN (4) ITL (1ms)
# -server-pid/-compare-pid give each server's CPU per request: with the
# engine's 1 ms steps both are far from saturating their core, so the
# CPU per request and the latencies show what the store adds.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=bench/out/store
mkdir -p "$out"

CONCURRENCY=${CONCURRENCY:-16}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-2s}
DURATION=${DURATION:-10s}
MAX_TOKENS=${MAX_TOKENS:-8}
PROMPT_TOKENS=${PROMPT_TOKENS:-32}
CHAIN=${CHAIN:-4}
ITL=${ITL:-1ms}

command -v redis-server >/dev/null || {
	echo "ERROR: redis-server not found (apt-get install redis-server)" >&2
	exit 1
}
echo "building..."
go build -o bin/vajra ./cmd/vajra

pin_server=()
pin_client=()
if command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then
	pin_server=(taskset -c 0)
	pin_client=(taskset -c 1)
else
	echo "WARNING: taskset or a second CPU is missing: not pinning" >&2
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

# A free loopback port for redis-server.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${pin_client[@]}" redis-server --port "$port" --bind 127.0.0.1 --dir "$tmp" --save "" --appendonly no \
	--daemonize no --loglevel warning --logfile "$tmp/redis.log" &
pids+=($!)
for _ in $(seq 1 100); do
	redis-cli -p "$port" ping >/dev/null 2>&1 && break
	sleep 0.1
done
redis-cli -p "$port" ping >/dev/null

# serve NAME ARGS...: a Vajra server on a free port; sets addr.
serve() {
	local name=$1
	shift
	local log=$out/serve-$name.log
	"${pin_server[@]}" bin/vajra serve --host 127.0.0.1 --port 0 --sim-itl "$ITL" "$@" >"$log" 2>&1 &
	pids+=($!)
	addr=
	for _ in $(seq 1 100); do
		addr=$(sed -n 's|^vajra serving on http://||p' "$log")
		[[ -n $addr ]] && break
		sleep 0.1
	done
	if [[ -z $addr ]]; then
		echo "ERROR: vajra serve ($name) did not start:" >&2
		cat "$log" >&2
		exit 1
	fi
}
serve memory --response-store memory
memory=http://$addr
memory_pid=${pids[-1]}
serve redis --response-store "redis://127.0.0.1:$port/0"
redis=http://$addr
redis_pid=${pids[-1]}
echo "memory store on $memory, Redis store on $redis (redis-server :$port)"

common=(-url "$memory" -compare "$redis" -label memory -compare-label redis -rounds "$ROUNDS"
	-server-pid "$memory_pid" -compare-pid "$redis_pid"
	-dialect responses -c "$CONCURRENCY" -warmup "$WARMUP" -duration "$DURATION" -max-time 5m
	-max-tokens "$MAX_TOKENS" -prompt-tokens "$PROMPT_TOKENS" -itl "$ITL" -quiet)

run() {
	local name=$1
	shift
	echo "== $name"
	GOMAXPROCS=1 "${pin_client[@]}" bin/vajra bench "${common[@]}" "$@" -out "$out/$name.json" | tee "$out/$name.txt"
}
run store -stream=false -store
run chain -stream=false -store -chain "$CHAIN"
run stream -store -chain "$CHAIN"

echo "keys in Redis after the runs: $(redis-cli -p "$port" dbsize)"
echo "results in $out/"
