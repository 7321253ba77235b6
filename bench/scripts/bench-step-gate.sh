#!/usr/bin/env bash
# bench-step-gate.sh: the remote engine's step gate (engine/remote/gate.go)
# on against off, in front of one llama-server, in one run.
#
# Writes the 8-layer x 512 random-weight F16 model of bench-remote.sh,
# starts ONE llama-server on it (-t 1, SLOTS slots of 512 tokens, pinned
# to CPU 0) and two `vajra serve --worker llama-server://...` in front of
# it (pinned to CPU 1, beside the client): A with --worker-step-window -1ms
# (each chunk delivered as it comes), B with the default window (1 ms).
# At each of CONCURRENCY streams, `vajra bench` in compare mode, A and B
# alternating for ROUNDS rounds: tokens/s, TTFT, gaps and each Vajra's own
# CPU per token (-server-pid, -compare-pid). Around each compare run it
# reads each Vajra's vajra_event_loop_wakes_total and
# vllm:generation_tokens_total from /metrics and prints the event loops'
# wakes per generated token (over the whole run, warm-up included).
#
# Everything is on loopback; every run is bounded (-duration, -max-time).
# Results go to bench/out/step-gate/. Environment overrides:
#   CONCURRENCY ("8 64") ROUNDS (3) WARMUP (3s) DURATION (10s)
#   MAX_TOKENS (64) PROMPT_TOKENS (32) SLOTS (64)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=bench/out/step-gate
mkdir -p "$out"
rm -f "$out"/*.txt "$out"/*.json

CONCURRENCY=${CONCURRENCY:-8 64}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-3s}
DURATION=${DURATION:-10s}
MAX_TOKENS=${MAX_TOKENS:-64}
PROMPT_TOKENS=${PROMPT_TOKENS:-32}
SLOTS=${SLOTS:-64}

server_bin=${VAJRA_LLAMA_SERVER:-.llama/server/bin/llama-server}
if [[ ! -x $server_bin ]]; then
	echo "ERROR: $server_bin is missing: run make llama-server" >&2
	exit 1
fi

echo "building..."
go build -o bin/vajra ./cmd/vajra

pin0=()
pin1=()
if command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then
	pin0=(taskset -c 0)
	pin1=(taskset -c 1)
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

model=$tmp/llama-8x512.gguf
bin/vajra tiny-model -o "$model" --layers 8 --dim 512 --heads 8 --kv-heads 4 --ff 1408 --f16

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

lport=$(free_port)
LD_LIBRARY_PATH=$(dirname "$server_bin") "${pin0[@]}" "$server_bin" -m "$model" --host 127.0.0.1 --port "$lport" \
	--no-webui --metrics --slots -np "$SLOTS" -c $((SLOTS * 512)) -t 1 >"$out/llama-server.log" 2>&1 &
pids+=("$!")
for _ in $(seq 1 300); do
	curl -sf "http://127.0.0.1:$lport/health" >/dev/null && break
	sleep 0.1
done
curl -sf "http://127.0.0.1:$lport/health" >/dev/null || { echo "ERROR: llama-server did not start" >&2; cat "$out/llama-server.log" >&2; exit 1; }

# start_vajra LOG ARGS...: vajra serve on port 0; sets vpid and vurl.
start_vajra() {
	local log=$1
	shift
	"${pin1[@]}" bin/vajra serve --host 127.0.0.1 --port 0 --served-model-name m \
		--worker "llama-server://127.0.0.1:$lport" --tokenizer "$model" "$@" >"$log" 2>&1 &
	vpid=$!
	pids+=("$vpid")
	local addr=
	for _ in $(seq 1 100); do
		addr=$(sed -n 's|^vajra serving on http://||p' "$log")
		[[ -n $addr ]] && break
		kill -0 "$vpid" 2>/dev/null || break
		sleep 0.1
	done
	[[ -n $addr ]] || { echo "ERROR: vajra serve did not start:" >&2; cat "$log" >&2; exit 1; }
	vurl=http://$addr
}
start_vajra "$out/vajra-off.log" --worker-step-window -1ms
apid=$vpid aurl=$vurl
start_vajra "$out/vajra-on.log"
bpid=$vpid burl=$vurl

# counters URL: "wakes tokens" from a Vajra's /metrics.
counters() {
	curl -sf "$1/metrics" | awk '/^vajra_event_loop_wakes_total /{w=$2} /^vllm:generation_tokens_total/{t+=$2} END{printf "%d %d\n", w, t}'
}

common=(-model m -max-tokens "$MAX_TOKENS" -prompt-tokens "$PROMPT_TOKENS" -warmup "$WARMUP" -duration "$DURATION" -max-time 3m -quiet)
for u in "$aurl" "$burl"; do # warm both paths once, not reported
	GOMAXPROCS=1 "${pin1[@]}" bin/vajra bench -url "$u" "${common[@]}" -c 8 -warmup 0s -duration 2s >/dev/null
done

summary=$out/summary.txt
: >"$summary"
for c in $CONCURRENCY; do
	read -r aw0 at0 < <(counters "$aurl")
	read -r bw0 bt0 < <(counters "$burl")
	GOMAXPROCS=1 "${pin1[@]}" bin/vajra bench -url "$aurl" -label gate-off -server-pid "$apid" \
		-compare "$burl" -compare-label gate-on -compare-pid "$bpid" -rounds "$ROUNDS" -c "$c" "${common[@]}" \
		-out "$out/compare-c$c.json" >"$out/compare-c$c.txt"
	read -r aw1 at1 < <(counters "$aurl")
	read -r bw1 bt1 < <(counters "$burl")
	{
		echo "== $c streams"
		grep -E 'comparison|^figure|tokens/s|ttft p50|gap p50|gap p99|server cpu' "$out/compare-c$c.txt"
		awk -v w="$((aw1 - aw0))" -v t="$((at1 - at0))" 'BEGIN{printf "event-loop wakes per token, gate off: %.3f (%d wakes, %d tokens)\n", w/t, w, t}'
		awk -v w="$((bw1 - bw0))" -v t="$((bt1 - bt0))" 'BEGIN{printf "event-loop wakes per token, gate on:  %.3f (%d wakes, %d tokens)\n", w/t, w, t}'
	} | tee -a "$summary"
done
echo "results: $out/ (summary.txt)"
