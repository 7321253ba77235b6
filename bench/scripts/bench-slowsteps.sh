#!/usr/bin/env bash
# bench-slowsteps.sh: Vajra's own CPU per streamed token when the engine
# steps slowly (the simulator at ITL between tokens, as vLLM's engine core
# steps on its tiny model here), with Vajra on CPU 0 and the load
# generator on CPU 1; per thread, so that the runtime's sysmon shows
# apart. Compares the binaries given (default: bin/vajra), alternating,
# ROUNDS rounds. See bench/RESULTS.md ("Slow engine steps and sysmon").
# Usage: bench-slowsteps.sh [BINARY...]; environment: ITL (18ms), C (8),
# DURATION (10s), ROUNDS (2), ARGS (extra `vajra serve` flags).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
ITL=${ITL:-18ms} C=${C:-8} DURATION=${DURATION:-10s} ROUNDS=${ROUNDS:-2} ARGS=${ARGS:-}
[[ -x bin/vajra ]] || make build >/dev/null
bins=("$@")
((${#bins[@]})) || bins=(bin/vajra)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
tck=$(getconf CLK_TCK)
for r in $(seq 1 "$ROUNDS"); do
	for b in "${bins[@]}"; do
		# shellcheck disable=SC2086
		taskset -c 0 "$b" serve --host 127.0.0.1 --port "$port" --sim-itl "$ITL" $ARGS >/dev/null 2>&1 &
		pid=$!
		for _ in $(seq 1 100); do curl -sf "127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done # bounded start-up poll
		snap() { for t in /proc/$pid/task/*; do echo "$(basename "$t") $(awk '{print $14+$15}' "$t/stat") $(awk '/ctxt/ {s+=$2} END {print s}' "$t/status")"; done | sort; }
		snap >/tmp/slowsteps.0
		out=$(taskset -c 1 env GOMAXPROCS=1 bin/vajra bench -url "http://127.0.0.1:$port" -c "$C" -warmup 0s -duration "$DURATION" \
			-max-tokens 64 -prompt-tokens 32 -max-time 1m -quiet 2>&1)
		snap >/tmp/slowsteps.1
		kill "$pid"
		wait "$pid" 2>/dev/null || true
		toks=$(echo "$out" | sed -n 's/.*server says \([0-9]*\) tokens.*/\1/p')
		join -a2 /tmp/slowsteps.0 /tmp/slowsteps.1 | awk -v b="$b" -v r="$r" -v toks="$toks" -v tck="$tck" \
			-v ttft="$(echo "$out" | awk '/^ttft/ {print $4"/"$5}')" -v gap="$(echo "$out" | awk '/^gap/ {print $4"/"$6}')" '
			NF == 5 { dt = $4 - $2; dc = $5 - $3 } NF == 3 { dt = $2; dc = $3 }
			{ T += dt; CS += dc; if (dt > top) { top = dt; topcs = dc } }
			END { printf "round=%s %s tokens=%d cpu_us_per_token=%.1f context_switches=%d busiest_thread_ticks=%d (%d switches) ttft_p50/p90_ms=%s gap_p50/p99_ms=%s\n",
				r, b, toks, 1e6 * T / tck / toks, CS, top, topcs, ttft, gap }'
	done
done
