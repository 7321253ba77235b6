#!/usr/bin/env bash
# bench-vllm.sh: the comparison Vajra exists for, on one machine and one
# model, every front door a vLLM user can put before vLLM's engine core:
#   A  vLLM's own OpenAI server (`vllm serve`)
#   B  Vajra in front of `vllm serve --grpc` (the gRPC servicer)
#   C  vLLM's Rust front end (VLLM_USE_RUST_FRONTEND=1 with vllm-rs)
#   D1 Vajra on the engine core, the engine attached (`vajra serve
#      --worker vllm-core://` and `vllm serve --headless`)
#   D2 Vajra on the engine core, launched by vLLM as its front end
#      (VLLM_USE_RUST_FRONTEND=1 VLLM_RUST_FRONTEND_PATH=bin/vajra)
#   D0 D1 with another Vajra binary, BASE_BIN (a build of an earlier
#      commit: a change measured against its parent in one run)
# Same vLLM (0.32.0), same tiny model (engine/remote/vllm/tinymodel.py:
# 2 layers, width 128, the real Llama 3 tokenizer, float32), same
# workload: `vajra bench` streaming chat, MAX_TOKENS tokens per request
# with ignore_eos, at each of CONCURRENCY streams.
#
# One vLLM runs at a time (two engine cores on two vCPUs would measure
# each other): per round, each side is started, measured at every
# concurrency and stopped, in turn, for ROUNDS rounds. CPU is counted per
# side from /proc: the engine (the VLLM::* processes: the scheduler and
# the model process) and the front door (every other process of the
# side: vLLM's API server, gRPC servicer, launcher, vllm-rs, Vajra), whose
# CPU per token is what the front doors cost.
#
# With PIN=1 (the default on a machine of two or more CPUs) vLLM's model
# process (VLLM::Worker, which polls its shared-memory queue and takes a
# whole CPU) is pinned to the last CPU and everything else (its
# VLLM::EngineCore scheduler, the front door, the load generator) to the
# others. (The scheduler and the model process on one CPU wait on each
# other's spin: 126 ms between tokens.) Its OpenMP threads are bound there
# by vLLM's own VLLM_CPU_OMP_THREADS_BIND. The front doors that size their
# threads by the CPUs they see (vllm-rs's tokio workers, Vajra's event
# loops and Ps) are started on the front CPUs, as in a container's
# cpuset, rather than moved there once started (with 2 CPUs seen and 1
# given, each runs twice the threads it has CPUs for): Vajra under
# taskset, vllm-rs and `vajra frontend` through a wrapper that vLLM's
# launcher runs (exec taskset ... "$@", the handed descriptors kept).
# vLLM's Python API server (A, and the servicer of B) is the launcher
# itself and is moved as before.
#
# The kernel's autogroups (kernel.sched_autogroup_enabled) share a CPU
# between sessions before tasks: the load generator (this script's
# session) and vLLM's spinning scheduler (the session `setsid vllm serve`
# starts, which also holds the front door vLLM's launcher starts: C and
# D2) then take turns on the front CPU as two groups, and in some rounds
# the load generator read nothing until the engine went idle (whole
# requests in one burst, dial timeouts; bench/RESULTS.md, "The burst
# rounds: autogroups"). With AUTOGROUP=0 (the default when this script may
# write /proc/sys/kernel/sched_autogroup_enabled) autogrouping is off for
# the run and set back at its end, so every task of the front CPU is
# scheduled on its own, whichever session started it.
#
# A round where a side delivers whole requests in one burst (its gap p50
# under BURST_GAP_MS: the tokens came together; see bench/RESULTS.md) is
# counted apart in the summary, not in the medians. SUMMARY_ONLY=1 prints
# the summary of the last run's bench/out/vllm/summary.txt again.
#
# Needs `make vllm vllm-rs tokenizers build`. Everything is on loopback;
# every run is bounded (-duration, -max-time). Environment overrides:
#   SIDES ("A B C D1 D2") CONCURRENCY ("1 8 32") ROUNDS (2) WARMUP (3s)
#   DURATION (10s) MAX_TOKENS (64) PROMPT_TOKENS (32) PIN (1)
#   BURST_GAP_MS (1) SUMMARY_ONLY (0) BASE_BIN (for D0) CLIENT_PROCS (2:
#   the load generator's GOMAXPROCS) PYSPY (a py-spy binary: dump the
#   engine core's threads mid-window, see dumps) AUTOGROUP (0: off for
#   the run, as said above; keep: leave the kernel's setting)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
SIDES=${SIDES:-A B C D1 D2}
CONCURRENCY=${CONCURRENCY:-1 8 32}
BURST_GAP_MS=${BURST_GAP_MS:-1}
SUMMARY_ONLY=${SUMMARY_ONLY:-0}
PYSPY=${PYSPY:-}
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
[[ " $SIDES " != *" C "* || -x $bin/vllm-rs ]] || { echo "vllm-rs is not installed: make vllm-rs" >&2; exit 1; }
out=bench/out/vllm
mkdir -p "$out"
((SUMMARY_ONLY)) || : >"$out/summary.txt"

# fe_wrap SIDE BINARY: the path vLLM's launcher is given for its Rust
# front end: BINARY itself, or with PIN a wrapper that starts it on the
# front CPUs.
fe_wrap() {
	((PIN)) || { echo "$2"; return; }
	local w=$root/$out/fe-$1.sh
	printf '#!/bin/sh\nexec taskset -c %s %s "$@"\n' "$front" "$2" >"$w"
	chmod +x "$w"
	echo "$w"
}
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
# The load generator runs with two Ps: with one, on the CPU where the
# engine core's busy loop spins, it read nothing for a whole request (the
# front door had written every token at its step, its loop woke once per
# token, the bytes sat in the client's socket) and the round counted as a
# burst; with two, or on the other CPU, the same server streamed
# (bench/RESULTS.md, "The burst rounds: the load generator").
CLIENT_PROCS=${CLIENT_PROCS:-2}
startpin=()
if ((PIN)); then
	client=(taskset -c "$front" env)
	startpin=(taskset -c "$front")
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
AUTOGROUP=${AUTOGROUP:-0}
ag=/proc/sys/kernel/sched_autogroup_enabled
ag_was=''
if [[ $AUTOGROUP == 0 && -r $ag ]] && ((!SUMMARY_ONLY)); then
	ag_was=$(cat "$ag")
	if [[ $ag_was != 0 ]] && ! echo 0 2>/dev/null >"$ag"; then
		echo "warning: cannot turn autogroups off ($ag; AUTOGROUP=keep to silence): rounds may burst" >&2
		ag_was=''
	fi
fi
restore_ag() { [[ -n $ag_was && $ag_was != 0 ]] && echo "$ag_was" >"$ag" || true; }
trap 'cleanup; restore_ag' EXIT
# dumps OUT: with PYSPY (a py-spy binary), three dumps of every thread of
# the engine core's scheduler process (VLLM::EngineCore) a second apart in
# the middle of the measured window, into OUT.pyspy: where its busy loop
# and its output thread are when a round delivers in bursts.
dumps() {
	local o=$1 pid
	: >"$o.pyspy"
	pid=$(ps -o pid=,comm= -g "$vpid" | awk '$2 ~ /^VLLM::EngineCor/ {print $1; exit}')
	[[ -n $pid ]] || return 0
	sleep "$(python3 -c "d=lambda s: float(s[:-2])/1000 if s.endswith('ms') else float(s[:-1]); print(1 + d('$WARMUP') + d('$DURATION')/2)")"
	for _ in 1 2 3; do
		"$PYSPY" dump --pid "$pid" >>"$o.pyspy" 2>&1 || true
		sleep 1
	done
}
# measure TAG URL C: one vajra bench run; prints its summary line.
measure() {
	local tag=$1 u=$2 c=$3 o="$out/$1-c$3-r$r"
	local c0 c1 toks
	read -r f0 e0 j0 < <(cpu "$vpid" "$jpid")
	[[ -n $PYSPY ]] && dumps "$o" &
	"${client[@]}" GOMAXPROCS="$CLIENT_PROCS" bin/vajra bench -url "$u" -model tiny -c "$c" -warmup "$WARMUP" -duration "$DURATION" -ramp 1s -no-drain \
		-max-tokens "$MAX_TOKENS" -prompt-tokens "$PROMPT_TOKENS" -max-time 3m -quiet -out "$o.json" >"$o.txt" || true
	read -r f1 e1 j1 < <(cpu "$vpid" "$jpid")
	awk -v tag="$tag" -v c="$c" -v r="$r" -v fcpu="$(python3 -c "print($f1-$f0)")" -v ecpu="$(python3 -c "print($e1-$e0)")" -v jcpu="$(python3 -c "print($j1-$j0)")" -v load="$(cut -d' ' -f1 /proc/loadavg)" '
		/^throughput:/ { tps = $2 }
		/^ttft / { ttft50 = $4; ttft99 = $6 }
		/^gap / { gap50 = $4; gap99 = $6 }
		END { printf "c=%s round=%s %-5s tokens/s=%.1f ttft_p50_ms=%s ttft_p99_ms=%s gap_p50_ms=%s gap_p99_ms=%s front_cpu_s=%.2f engine_cpu_s=%.2f vajra_cpu_s=%.2f loadavg1=%s\n", c, r, tag, tps, ttft50, ttft99, gap50, gap99, fcpu, ecpu, jcpu, load }' "$o.txt" | tee -a "$out/summary.txt"
}
((SUMMARY_ONLY)) && ROUNDS=0
for r in $(seq 1 "$ROUNDS"); do
	for side in $SIDES; do
		p=$(freeport)
		url="http://127.0.0.1:$p"
		case $side in
		A)
			setsid "$bin/vllm" serve "$model" --host 127.0.0.1 --port "$p" "${vargs[@]}" >"$out/vllm-A.log" 2>&1 &
			vpid=$! ;;
		B)
			q=$(freeport)
			setsid "$bin/vllm" serve "$model" --host 127.0.0.1 --port "$q" "${vargs[@]}" --grpc >"$out/vllm-B.log" 2>&1 &
			vpid=$!
			"${startpin[@]}" bin/vajra serve --host 127.0.0.1 --port "$p" --worker "vllm://127.0.0.1:$q" --served-model-name tiny >"$out/vajra-B.log" 2>&1 &
			jpid=$! ;;
		C | D2)
			fe=$root/$bin/vllm-rs
			[[ $side == D2 ]] && fe=$root/bin/vajra
			fe=$(fe_wrap "$side" "$fe")
			VLLM_USE_RUST_FRONTEND=1 VLLM_RUST_FRONTEND_PATH=$fe setsid "$bin/vllm" serve "$model" --host 127.0.0.1 --port "$p" "${vargs[@]}" >"$out/vllm-$side.log" 2>&1 &
			vpid=$! ;;
		D0 | D1)
			q=$(freeport)
			vbin=bin/vajra
			[[ $side == D0 ]] && vbin=${BASE_BIN:?D0 needs BASE_BIN}
			"${startpin[@]}" "$vbin" serve --host 127.0.0.1 --port "$p" --worker "vllm-core://127.0.0.1:$q" --tokenizer "$model" --served-model-name tiny \
				--max-model-len 2048 >"$out/vajra-$side.log" 2>&1 &
			jpid=$!
			setsid "$bin/vllm" serve "$model" --headless --data-parallel-address 127.0.0.1 --data-parallel-rpc-port "$q" \
				--data-parallel-size 1 --data-parallel-size-local 1 "${vargs[@]}" >"$out/vllm-$side.log" 2>&1 &
			vpid=$! ;;
		*) echo "unknown side $side" >&2; exit 1 ;;
		esac
		# D1 answers /health before the engine attaches: wait for a model
		# answer instead (bounded by waitup).
		waitup "$url/health"
		for _ in $(seq 1 600); do
			curl -sf "$url/v1/completions" -H 'content-type: application/json' -d '{"model":"tiny","prompt":"hi","max_tokens":1}' >/dev/null 2>&1 && break
			sleep 0.5 # polling for the engine, bounded (5 min)
		done
		((PIN)) && pin "$vpid" "$jpid"
		# Warm: the first requests compile and fill caches.
		"${client[@]}" GOMAXPROCS="$CLIENT_PROCS" bin/vajra bench -url "$url" -model tiny -c 4 -warmup 0s -duration 3s -max-tokens 16 -quiet -max-time 1m >/dev/null 2>&1 || true
		for c in $CONCURRENCY; do
			measure "$side" "$url" "$c"
		done
		cleanup
	done
done
echo
echo "=== per concurrency: medians over the rounds (burst rounds apart)"
# CPU per token: the run's CPU over the run's tokens, estimated as the
# window's tokens/s times warm-up plus window (every side alike).
span=$(python3 -c "import sys; d=lambda s: float(s[:-2])/1000 if s.endswith('ms') else float(s[:-1]); print(d('$WARMUP')+d('$DURATION'))")
python3 - "$out/summary.txt" "$span" "$BURST_GAP_MS" "$SIDES" <<'PY'
import statistics, sys
span, burst, sides = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4].split()
rows = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    side = line.split()[2]
    rows.setdefault((int(f["c"]), side), []).append(f)
med = lambda xs: statistics.median(xs) if xs else float("nan")
for c in sorted({c for c, _ in rows}):
    print(f"c={c}")
    for side in sides:
        runs = rows.get((c, side), [])
        ok = [x for x in runs if float(x["gap_p50_ms"]) >= burst]
        if not runs:
            continue
        tok = lambda x: float(x["tokens/s"]) * span
        front = med([1e6 * float(x["front_cpu_s"]) / tok(x) for x in ok if float(x["tokens/s"]) > 0])
        eng = med([1e6 * float(x["engine_cpu_s"]) / tok(x) for x in ok if float(x["tokens/s"]) > 0])
        vaj = med([1e6 * float(x["vajra_cpu_s"]) / tok(x) for x in ok if float(x["tokens/s"]) > 0])
        print(f"  {side:3s} rounds={len(ok)}/{len(runs)} (burst {len(runs)-len(ok)}) tokens/s={med([float(x['tokens/s']) for x in ok]):.0f} "
              f"ttft_p50={med([float(x['ttft_p50_ms']) for x in ok]):.1f}ms gap_p99={med([float(x['gap_p99_ms']) for x in ok]):.1f}ms "
              f"front_cpu/token={front:.0f}us (Vajra alone {vaj:.0f}us) engine_cpu/token={eng:.0f}us")
PY
