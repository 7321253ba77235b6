#!/usr/bin/env bash
# bench-aiperf.sh: NVIDIA's aiperf against `vajra bench` (and a raw SSE
# capture, bench/scripts/sse_capture.py, as the referee) on one
# `vajra serve --model` process, the same workload for all three, in
# alternation (issue 23 item 6; bench/RESULTS.md "Load tools: aiperf
# against vajra bench").
#
# Workload: streaming chat completions of one fixed prompt (vajra bench's
# BuildPrompt: ISL words, ISL tokens in the model's vocabulary; aiperf reads
# the same text from a single_turn input file), OSL output tokens with
# ignore_eos, closed loop at each of CONCURRENCY streams, PER_STREAM
# measured requests per stream (or REQUESTS, one count per concurrency)
# after a warm-up of one request per stream; every run bounded by MAX_TIME
# seconds. The server's own histograms (/metrics: vllm:time_to_first_token,
# inter_token_latency, e2e_request_latency, generation_tokens) are saved
# before and after every run, the fourth view of the same requests. Each round runs aiperf, vajra bench and the capture at
# each concurrency, their order rotated by round.
#
# Needs: make build real-model llama aiperf (the Makefile target
# bench-aiperf does them). Results: $OUT (default bench/out/aiperf-TIME):
# per run aiperf's artifacts, vajra bench's JSON, the capture's events and
# summary, and summary.md, the table of bench/scripts/aiperf_compare.py.
#
# Variables: MODEL, VENV (.venv-aiperf), PORT (18431), ROUNDS (2),
# CONCURRENCY ("1 8"), PER_STREAM (10), REQUESTS (e.g. "10 24"), ISL (128), OSL (64), MAX_TIME (300),
# SERVE_FLAGS (extra `vajra serve` flags), OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=${MODEL:-.models/SmolLM2-135M-Instruct.Q4_1.gguf}
VENV=${VENV:-.venv-aiperf}
PORT=${PORT:-18431}
ROUNDS=${ROUNDS:-2}
CONCURRENCY=${CONCURRENCY:-"1 8"}
PER_STREAM=${PER_STREAM:-10}
REQUESTS=${REQUESTS:-}
ISL=${ISL:-128}
OSL=${OSL:-64}
MAX_TIME=${MAX_TIME:-300}
SERVE_FLAGS=${SERVE_FLAGS:-}
OUT=${OUT:-bench/out/aiperf-$(date -u +%Y%m%dT%H%M%SZ)}
URL=http://127.0.0.1:$PORT
PY=$VENV/bin/python
TOK=$VENV/tokenizer

for f in bin/vajra "$MODEL" "$VENV/bin/aiperf" "$TOK/tokenizer.json"; do
	[ -e "$f" ] || { echo "bench-aiperf: $f is missing (make build real-model llama aiperf)" >&2; exit 1; }
done
mkdir -p "$OUT"

# shellcheck disable=SC2086
bin/vajra serve --model "$MODEL" --port "$PORT" $SERVE_FLAGS >"$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do
	curl -sf "$URL/health" >/dev/null 2>&1 && break
	kill -0 "$SERVER" 2>/dev/null || { echo "bench-aiperf: vajra serve exited:" >&2; tail -5 "$OUT/serve.log" >&2; exit 1; }
	sleep 0.5
done
curl -sf "$URL/health" >/dev/null || { echo "bench-aiperf: vajra serve not healthy after 120 s" >&2; exit 1; }
NAME=$(curl -sf "$URL/v1/models" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')

# The tokenizer must agree with the server's before its counts mean anything.
"$PY" bench/scripts/gguf_tokenizer.py "$MODEL" "$OUT/tokenizer" --check "$URL" >"$OUT/tokenizer-check.txt"
# The one prompt, as aiperf's single_turn input file.
"$PY" - "$ISL" "$OSL" >"$OUT/prompt.jsonl" <<'PYEOF'
import json, sys
sys.path.insert(0, "bench/scripts")
from sse_capture import build_prompt
print(json.dumps({"text": build_prompt(int(sys.argv[1])), "output_length": int(sys.argv[2])}))
PYEOF

{
	echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo '+dirty')"
	echo "model $MODEL ($NAME), serve flags: ${SERVE_FLAGS:-none}, nproc $(nproc)"
	echo "rounds $ROUNDS, concurrency $CONCURRENCY, requests ${REQUESTS:-$PER_STREAM per stream}, isl $ISL, osl $OSL"
	echo "aiperf $("$VENV/bin/aiperf" --version 2>/dev/null | tail -1)"
} >"$OUT/meta.txt"
cat "$OUT/meta.txt"

cpu_ticks() { awk '{print $14+$15}' "/proc/$SERVER/stat"; }

# run TOOL C N ROUND: one measured run, with the load average at its start,
# the server's CPU ticks over it and the tool's own CPU (/usr/bin/time).
run() {
	local tool=$1 c=$2 n=$3 round=$4
	local dir="$OUT/r$round-c$c-$tool"
	mkdir -p "$dir"
	cut -d' ' -f1-3 /proc/loadavg >"$dir/loadavg"
	curl -sf "$URL/metrics" >"$dir/metrics.before" || true
	local t0; t0=$(cpu_ticks)
	local rc=0
	case $tool in
	aiperf)
		/usr/bin/time -f '%U %S %e' -o "$dir/time" timeout $((MAX_TIME + 180)) \
			"$VENV/bin/aiperf" profile --model "$NAME" --url "$URL" --endpoint-type chat --streaming \
			--tokenizer "$TOK" --input-file "$OUT/prompt.jsonl" --custom-dataset-type single_turn \
			--extra-inputs ignore_eos:true --concurrency "$c" --request-count "$n" \
			--warmup-request-count "$c" --request-timeout-seconds "$MAX_TIME" \
			--ui-type none --no-server-metrics --artifact-dir "$dir" >"$dir/stdout.txt" 2>&1 &
		local pid=$!
		# aiperf's CPU over time (its services are separate processes), to
		# tell the profiling window's from the start-up's.
		"$PY" bench/scripts/tree_cpu.py "$pid" "$dir/tree_cpu.txt" &
		wait "$pid" || rc=$?
		;;
	vajra)
		/usr/bin/time -f '%U %S %e' -o "$dir/time" \
			bin/vajra bench -url "$URL" -model "$NAME" -c "$c" -n "$n" -warmup 3s \
			-prompt-tokens "$ISL" -max-tokens "$OSL" -server-pid "$SERVER" \
			-max-time "${MAX_TIME}s" -quiet -out "$dir/vajra.json" >"$dir/stdout.txt" 2>&1 || rc=$?
		;;
	raw)
		/usr/bin/time -f '%U %S %e' -o "$dir/time" \
			"$PY" bench/scripts/sse_capture.py "$URL" "$NAME" -c "$c" -n "$n" --warmup 1 \
			--prompt-tokens "$ISL" --max-tokens "$OSL" --tokenizer "$TOK" --max-time "$MAX_TIME" \
			--out "$dir/events.jsonl" --json "$dir/capture.json" >"$dir/stdout.txt" 2>&1 || rc=$?
		;;
	esac
	echo $(($(cpu_ticks) - t0)) >"$dir/server_ticks"
	curl -sf "$URL/metrics" >"$dir/metrics.after" || true
	echo "$rc" >"$dir/rc"
	echo "round $round c=$c $tool: rc $rc, load $(cat "$dir/loadavg"), $(cat "$dir/time" | tail -1) (user sys wall s)"
}

tools=(aiperf vajra raw)
for round in $(seq 1 "$ROUNDS"); do
	k=0
	read -r -a counts <<<"$REQUESTS"
	for c in $CONCURRENCY; do
		n=${counts[$k]:-$((c * PER_STREAM))}
		k=$((k + 1))
		for i in 0 1 2; do
			run "${tools[$(((i + round - 1) % 3))]}" "$c" "$n" "$round"
		done
	done
done
"$PY" bench/scripts/aiperf_compare.py "$OUT" "$(getconf CLK_TCK)" | tee "$OUT/summary.md"
