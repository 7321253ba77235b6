#!/usr/bin/env bash
# bench-vllm.sh: the comparison Vajra exists for, on one machine and one
# model: vLLM's own OpenAI server (A) against Vajra in front of `vllm serve
# --grpc` (B), same vLLM, same tiny model (engine/remote/vllm/tinymodel.py:
# 2 layers, width 128, the real Llama 3 tokenizer, float32), same workload:
# `vajra bench` streaming chat, MAX_TOKENS tokens per request with
# ignore_eos, at each of CONCURRENCY streams.
#
# One vLLM runs at a time (two engine cores on two vCPUs would measure
# each other): per round, A is started, measured at every concurrency and
# stopped, then B, alternating for ROUNDS rounds. Server CPU per token is
# every process of the server: vLLM's process group (API server, engine
# core) from /proc, plus Vajra's process for B.
#
# With PIN=1 (the default on a machine of two or more CPUs) vLLM's model
# process (VLLM::Worker, which polls its shared-memory queue and takes a
# whole CPU) is pinned to the last CPU and everything else (its
# VLLM::EngineCore scheduler, its API server or gRPC servicer process,
# Vajra, the load generator) to the others. (The scheduler and the model
# process on one CPU wait on each other's spin: 126 ms between tokens.)
# Its OpenMP threads are bound there by vLLM's own VLLM_CPU_OMP_THREADS_BIND.
# CPU is counted per side: the engine (the VLLM::* processes) and the
# front door, whose CPU per token (A: vLLM's API server process; B: its
# gRPC servicer process plus Vajra) is what the two front doors cost.
#
# Needs `make vllm tokenizers build`. Everything is on loopback; every run
# is bounded (-duration, -max-time). Environment overrides:
#   CONCURRENCY ("1 8") ROUNDS (2) WARMUP (3s) DURATION (10s)
#   MAX_TOKENS (64) PROMPT_TOKENS (32) PIN (1)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
CONCURRENCY=${CONCURRENCY:-1 8}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-3s}
DURATION=${DURATION:-10s}
MAX_TOKENS=${MAX_TOKENS:-64}
PROMPT_TOKENS=${PROMPT_TOKENS:-32}
ncpu=$(nproc)
PIN=${PIN:-$((ncpu >= 2))}
last=$((ncpu - 1))
front="0-$((last - 1))"
bin=.vllm/bin
model=.vllm/models/tiny-llama3
[[ -x $bin/vllm ]] || { echo "vLLM is not installed: make vllm" >&2; exit 1; }
[[ -d $model ]] || { echo "no $model: run go test -run TestRealVLLM ./engine/remote/vllm/ once (it writes it)" >&2; exit 1; }
[[ -x bin/vajra ]] || make build >/dev/null
out=bench/out/vllm
mkdir -p "$out"
: >"$out/summary.txt"

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# cpu PGID [PID]: CPU seconds (utime+stime, children reaped included) of
# the front (every process in the group but vLLM's engine processes, plus
# PID) and of the engine (the group's VLLM::* processes), and PID's alone:
# "FRONT ENGINE PIDCPU".
cpu() {
	local g=$1 p=${2:-}
	python3 - "$g" "$p" <<'PY'
import os, sys
g, p = int(sys.argv[1]), sys.argv[2]
tck = os.sysconf("SC_CLK_TCK")
front = engine = own = 0
for d in os.listdir("/proc"):
    if not d.isdigit():
        continue
    try:
        s = open(f"/proc/{d}/stat").read()
    except OSError:
        continue
    comm = s[s.index("(") + 1:s.rindex(")")]
    f = s[s.rindex(")") + 2:].split()
    pid, pgrp = int(d), int(f[2])
    t = int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
    if pgrp == g and comm.startswith("VLLM::"):
        engine += t
    elif pgrp == g or (p and pid == int(p)):
        front += t
    if p and pid == int(p):
        own += t
print(front / tck, engine / tck, own / tck)
PY
}
# pin PGID [PID]: the group's VLLM::Worker processes (every thread) onto
# the last CPU, the rest of the group and PID onto the others.
pin() {
	local g=$1 p=${2:-} pid comm
	for pid in $(ps -o pid= -g "$g") $p; do
		comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
		if [[ $comm == VLLM::Worker* ]]; then
			taskset -a -p -c "$last" "$pid" >/dev/null
		else
			taskset -a -p -c "$front" "$pid" >/dev/null
		fi
	done
}
waitup() { # URL
	for _ in $(seq 1 600); do
		curl -sf "$1" >/dev/null 2>&1 && return 0
		sleep 0.5 # polling the server's health, bounded (5 min)
	done
	echo "ERROR: $1 did not come up" >&2
	return 1
}
export VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=nobind HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
vargs=(--served-model-name tiny --max-model-len 2048 --dtype float32 --enforce-eager --max-num-seqs 16)
client=(env)
if ((PIN)); then
	client=(taskset -c "$front" env)
	# The model process's OpenMP threads: one, bound to the last CPU (two
	# threads spinning at a barrier on one CPU wait out each other's slices).
	export VLLM_CPU_OMP_THREADS_BIND=$last
fi
vpid='' jpid=''
cleanup() {
	[[ -n $vpid ]] && kill -9 -- -"$vpid" 2>/dev/null || true
	[[ -n $jpid ]] && kill "$jpid" 2>/dev/null || true
	vpid='' jpid=''
}
trap cleanup EXIT
# measure TAG URL C: one vajra bench run; prints its summary line.
measure() {
	local tag=$1 u=$2 c=$3 o="$out/$1-c$3-r$r"
	local c0 c1 toks
	read -r f0 e0 j0 < <(cpu "$vpid" "$jpid")
	"${client[@]}" GOMAXPROCS=1 bin/vajra bench -url "$u" -model tiny -c "$c" -warmup "$WARMUP" -duration "$DURATION" -ramp 1s -no-drain \
		-max-tokens "$MAX_TOKENS" -prompt-tokens "$PROMPT_TOKENS" -max-time 3m -quiet -out "$o.json" >"$o.txt" || true
	read -r f1 e1 j1 < <(cpu "$vpid" "$jpid")
	awk -v tag="$tag" -v c="$c" -v r="$r" -v fcpu="$(python3 -c "print($f1-$f0)")" -v ecpu="$(python3 -c "print($e1-$e0)")" -v jcpu="$(python3 -c "print($j1-$j0)")" -v load="$(cut -d' ' -f1 /proc/loadavg)" '
		/^throughput:/ { tps = $2 }
		/^ttft / { ttft50 = $4; ttft99 = $6 }
		/^gap / { gap50 = $4; gap99 = $6 }
		END { printf "c=%s round=%s %-5s tokens/s=%.1f ttft_p50_ms=%s ttft_p99_ms=%s gap_p50_ms=%s gap_p99_ms=%s front_cpu_s=%.2f engine_cpu_s=%.2f vajra_cpu_s=%.2f loadavg1=%s\n", c, r, tag, tps, ttft50, ttft99, gap50, gap99, fcpu, ecpu, jcpu, load }' "$o.txt" | tee -a "$out/summary.txt"
}
for r in $(seq 1 "$ROUNDS"); do
	for side in A B; do
		p=$(freeport)
		if [[ $side == A ]]; then
			setsid "$bin/vllm" serve "$model" --host 127.0.0.1 --port "$p" "${vargs[@]}" >"$out/vllm-openai.log" 2>&1 &
			vpid=$!
			waitup "http://127.0.0.1:$p/health"
			url="http://127.0.0.1:$p"
		else
			setsid "$bin/vllm" serve "$model" --host 127.0.0.1 --port "$p" "${vargs[@]}" --grpc >"$out/vllm-grpc.log" 2>&1 &
			vpid=$!
			q=$(freeport)
			bin/vajra serve --host 127.0.0.1 --port "$q" --worker "vllm://127.0.0.1:$p" --served-model-name tiny >"$out/vajra.log" 2>&1 &
			jpid=$!
			waitup "http://127.0.0.1:$q/health"
			url="http://127.0.0.1:$q"
		fi
		((PIN)) && pin "$vpid" "$jpid"
		# Warm: the first requests compile and fill caches.
		"${client[@]}" GOMAXPROCS=1 bin/vajra bench -url "$url" -model tiny -c 4 -warmup 0s -duration 3s -max-tokens 16 -quiet -max-time 1m >/dev/null 2>&1 || true
		for c in $CONCURRENCY; do
			measure "$side" "$url" "$c"
		done
		cleanup
	done
done
echo
echo "=== B (Vajra in front of vllm --grpc) / A (vLLM's OpenAI server), per round"
# CPU per token: the run's server CPU over the run's tokens, estimated as
# the window's tokens/s times warm-up plus window (both sides alike).
span=$(python3 -c "import sys; d=lambda s: float(s[:-2])/1000 if s.endswith('ms') else float(s[:-1]); print(d('$WARMUP')+d('$DURATION'))")
python3 - "$out/summary.txt" "$span" <<'PY'
import sys
span = float(sys.argv[2])
rows = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    side = line.split()[2]
    rows.setdefault((int(f["c"]), int(f["round"])), {})[side] = f
for (c, r), s in sorted(rows.items()):
    if "A" not in s or "B" not in s:
        continue
    a, b = s["A"], s["B"]
    tok = lambda x: float(x["tokens/s"]) * span
    fa, fb = 1e6 * float(a["front_cpu_s"]) / tok(a), 1e6 * float(b["front_cpu_s"]) / tok(b)
    jb = 1e6 * float(b["vajra_cpu_s"]) / tok(b)
    ea, eb = 1e6 * float(a["engine_cpu_s"]) / tok(a), 1e6 * float(b["engine_cpu_s"]) / tok(b)
    print(f"c={c} round={r}: tokens/s {float(b['tokens/s'])/float(a['tokens/s']):.2f}x ({b['tokens/s']} vs {a['tokens/s']}); "
          f"TTFT p50 {a['ttft_p50_ms']} -> {b['ttft_p50_ms']} ms; gap p99 {a['gap_p99_ms']} -> {b['gap_p99_ms']} ms; "
          f"front CPU/token {fa:.0f} -> {fb:.0f} us ({fb/fa:.2f}x; Vajra {jb:.0f}, vLLM's servicer {fb-jb:.0f}); engine CPU/token {ea:.0f} -> {eb:.0f} us")
PY
