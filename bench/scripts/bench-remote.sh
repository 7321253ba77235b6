#!/usr/bin/env bash
# bench-remote.sh: Vajra in front of llama-server against llama-server
# alone, same worker, same workload, in one run; and Vajra's own CPU per
# streamed token on this path against the simulator path.
#
# Writes the 8-layer x 512 random-weight F16 llama model of bench-llama.sh
# with `vajra tiny-model`, starts ONE llama-server on it (-t 1, SLOTS slots
# of 512 tokens, pinned to CPU 0) and `vajra serve --worker
# llama-server://...` in front of it (pinned to CPU 1, beside the client),
# then at each of CONCURRENCY streams runs `vajra bench` in compare mode:
# A = llama-server's own /v1/chat/completions (its chat template,
# tokenizer, detokenizer and OpenAI chunks), B = Vajra's
# /v1/chat/completions through to the same llama-server's /completion;
# streaming chat, MAX_TOKENS tokens per request with ignore_eos, A and B
# alternating for ROUNDS rounds (B/A ratios are medians of the per-round
# ratios, so the shared machine's drift hits both alike). It reports
# tokens/s B/A, added TTFT p50 (B - A), added gap p99 (B - A) and
# Vajra's own CPU per token (its process only, -compare-pid). Then side C,
# SGLang Model Gateway (smg) in front of the same llama-server, against
# Vajra: each process's own CPU per streamed token (issue 32's target:
# Vajra's at most smg's).
#
# Then the simulator path: `vajra serve` on the simulated engine with
# --sim-itl set to the gap p50 Vajra saw through llama-server at that
# concurrency, the same workload, Vajra's CPU per token; the ratio
# remote/sim is Vajra's cost of a remote token against an in-process one.
#
# Vajra runs with --tokenizer MODEL (engine/tokenizer reads the GGUF's
# vocabulary), as a deployment would, so that it does not ask
# llama-server's /tokenize per request (TOKENIZER=0 measures that path).
#
# Everything is on loopback; every run is bounded (-duration, -max-time).
# Results go to bench/out/remote/. Environment overrides:
#   CONCURRENCY ("1 8 64") ROUNDS (3) WARMUP (3s) DURATION (10s)
#   MAX_TOKENS (64) PROMPT_TOKENS (32) SLOTS (64) TOKENIZER (1; 0 leaves
#   tokenization to llama-server's /tokenize) SMG (.smg/bin/smg, from
#   make smg; a missing one skips side C)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=bench/out/remote
mkdir -p "$out"
rm -f "$out"/*.txt "$out"/*.json

CONCURRENCY=${CONCURRENCY:-1 8 64}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-3s}
DURATION=${DURATION:-10s}
MAX_TOKENS=${MAX_TOKENS:-64}
PROMPT_TOKENS=${PROMPT_TOKENS:-32}
SLOTS=${SLOTS:-64}
TOKENIZER=${TOKENIZER:-1}
SMG=${SMG:-.smg/bin/smg}
SMG_PY=$(dirname "$SMG")/python

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

# llama-server: SLOTS slots of 512 tokens each.
lport=$(free_port)
LD_LIBRARY_PATH=$(dirname "$server_bin") "${pin0[@]}" "$server_bin" -m "$model" --host 127.0.0.1 --port "$lport" \
	--alias m --no-webui --metrics --slots -np "$SLOTS" -c $((SLOTS * 512)) -t 1 >"$out/llama-server.log" 2>&1 &
lpid=$!
pids+=("$lpid")
for _ in $(seq 1 300); do
	curl -sf "http://127.0.0.1:$lport/health" >/dev/null && break
	sleep 0.1
done
curl -sf "http://127.0.0.1:$lport/health" >/dev/null || { echo "ERROR: llama-server did not start" >&2; cat "$out/llama-server.log" >&2; exit 1; }

# start_vajra LOG ARGS...: vajra serve on port 0; sets vpid and vurl.
start_vajra() {
	local log=$1
	shift
	"${pin1[@]}" bin/vajra serve --host 127.0.0.1 --port 0 --served-model-name m "$@" >"$log" 2>&1 &
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

tok_args=()
if [[ $TOKENIZER == 1 ]]; then
	tok_args=(--tokenizer "$model")
fi
start_vajra "$out/vajra-remote.log" --worker "llama-server://127.0.0.1:$lport" "${tok_args[@]}"
rpid=$vpid
rurl=$vurl
echo "llama-server pid $lpid on :$lport; vajra (remote) pid $rpid on $rurl"

common=(-model m -max-tokens "$MAX_TOKENS" -prompt-tokens "$PROMPT_TOKENS" -warmup "$WARMUP" -duration "$DURATION" -max-time 3m -quiet)

# Warm both paths once (weights, slots' first prompts), not reported.
GOMAXPROCS=1 "${pin1[@]}" bin/vajra bench -url "$rurl" "${common[@]}" -c 8 -warmup 0s -duration 3s >/dev/null

summary=$out/summary.txt
: >"$summary"
for c in $CONCURRENCY; do
	name=compare-c$c
	GOMAXPROCS=1 "${pin1[@]}" bin/vajra bench -url "http://127.0.0.1:$lport" -label llama-server -server-pid "$lpid" \
		-compare "$rurl" -compare-label vajra -compare-pid "$rpid" -rounds "$ROUNDS" -c "$c" "${common[@]}" \
		-out "$out/$name.json" >"$out/$name.txt"
	echo "== $c streams" | tee -a "$summary"
	grep -E 'comparison|^figure|tokens/s|ttft p50|gap p50|gap p99|server cpu' "$out/$name.txt" | tee -a "$summary"
done

# Side C: SGLang Model Gateway (PyPI smg, make smg) in front of the same
# llama-server, pinned beside Vajra; it relays llama-server's own
# /v1/chat/completions bytes (no tokenizer, no detokenizer of its own).
# A = smg, B = Vajra, each process's CPU per token.
if [[ -x $SMG ]]; then
	sport=$(free_port)
	"${pin1[@]}" "$SMG" launch --host 127.0.0.1 --port "$sport" --worker-urls "http://127.0.0.1:$lport" \
		--policy round_robin --log-level warn >"$out/smg.log" 2>&1 &
	spid=$!
	pids+=("$spid")
	# Ready once it has registered the worker and its model (llama-server's
	# --alias m), which it does after it answers /health.
	smg_ready() { curl -sf "http://127.0.0.1:$sport/v1/models" 2>/dev/null | grep -q '"id": *"m"'; }
	for _ in $(seq 1 300); do
		smg_ready && break
		sleep 0.1
	done
	smg_ready || { echo "ERROR: smg did not register llama-server's model m" >&2; tail -n 20 "$out/smg.log" >&2; exit 1; }
	echo "smg $("$SMG_PY" -c 'import importlib.metadata as m; print(m.version("smg"))') pid $spid on :$sport"
	GOMAXPROCS=1 "${pin1[@]}" bin/vajra bench -url "http://127.0.0.1:$sport" "${common[@]}" -c 8 -warmup 0s -duration 3s >/dev/null
	for c in $CONCURRENCY; do
		name=smg-c$c
		GOMAXPROCS=1 "${pin1[@]}" bin/vajra bench -url "http://127.0.0.1:$sport" -label smg -server-pid "$spid" \
			-compare "$rurl" -compare-label vajra -compare-pid "$rpid" -rounds "$ROUNDS" -c "$c" "${common[@]}" \
			-out "$out/$name.json" >"$out/$name.txt"
		echo "== smg (A) against vajra (B), $c streams" | tee -a "$summary"
		grep -E 'comparison|^figure|tokens/s|ttft p50|gap p50|gap p99|server cpu' "$out/$name.txt" | tee -a "$summary"
	done
	kill "$spid"
	wait "$spid" 2>/dev/null || true
else
	echo "NOTE: $SMG is missing (make smg): no SGLang Model Gateway side" | tee -a "$summary"
fi

# The simulator path: Vajra's CPU per token on the simulated engine, at the
# gap Vajra saw through llama-server.
kill "$rpid"
wait "$rpid" 2>/dev/null || true
for c in $CONCURRENCY; do
	gap=$(python3 - "$out/compare-c$c.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for f in d.get("figures", d.get("Figures", [])):
    name = f.get("name", f.get("Name", ""))
    if name.startswith("gap p50"):
        print("%.3fms" % f.get("b", f.get("B", 0)))
        break
EOF
)
	[[ -n $gap ]] || gap=5ms
	start_vajra "$out/vajra-sim-c$c.log" --sim-itl "$gap" --sim-prefill-tps 0 --max-num-seqs "$SLOTS"
	GOMAXPROCS=1 "${pin1[@]}" bin/vajra bench -url "$vurl" -server-pid "$vpid" -itl "$gap" -c "$c" "${common[@]}" \
		-out "$out/sim-c$c.json" >"$out/sim-c$c.txt"
	echo "== simulator, $c streams, --sim-itl $gap" | tee -a "$summary"
	grep -E '^throughput|^server' "$out/sim-c$c.txt" | tee -a "$summary"
	kill "$vpid"
	wait "$vpid" 2>/dev/null || true
done
echo "results: $out/ (summary.txt)"
