#!/usr/bin/env bash
# bench-llama.sh: `vajra bench` against the llama.cpp engine, and the front
# door's own CPU (the server's CPU outside the model's compute).
#
# Writes an 8-layer x 512 random-weight F16 llama model (8 heads, 4 KV heads,
# feed-forward 1408) with `vajra tiny-model`, serves it with `vajra serve
# --model ... --threads 1` pinned to CPU 0, and runs `vajra bench` pinned to
# CPU 1: streaming chat, MAX_TOKENS tokens per request with ignore_eos, at
# each of CONCURRENCY concurrent streams, REPS times (the points alternate
# within each repetition, so drift hits them alike). For every run it prints
#
#   tokens/s, TTFT p50/p99 and inter-token gap p50/p99 (as vajra bench);
#   window (vajra bench -engine-cpu, the measured window): server CPU
#     (schedstat), engine compute CPU, front door = server - engine, per
#     token and as a share of the engine's;
#   run (idle to idle, around the whole bench run, warm-up and drain
#     included): server CPU from /proc/PID/stat utime+stime, engine compute
#     CPU and generated tokens from /metrics, the same front-door figures.
#
# With --threads 1 the engine's compute is all on one thread, measured by
# its CPU clock (vajra_engine_compute_cpu_seconds_total), so process CPU
# minus it is everything else: HTTP, sessions, the scheduler's bookkeeping,
# (de)tokenizing, framing, the Go runtime.
#
# Then, unless PROFILE=0, one more run at the last concurrency with a CPU
# profile of the server over its window (go tool pprof -top into the output).
#
# Everything is on loopback; every run is bounded (-duration, -max-time).
# Results go to bench/out/llama/. Environment overrides:
#   CONCURRENCY ("1 8 64") REPS (3) WARMUP (5s) DURATION (25s) RAMP (2s)
#   MAX_TOKENS (64) PROMPT_TOKENS (32) PROFILE (1) PERF (0: 1 adds a perf
#   record of the server, where perf is installed)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=bench/out/llama
mkdir -p "$out"
rm -f "$out"/run-*.txt "$out"/run-*.json

CONCURRENCY=${CONCURRENCY:-1 8 64}
REPS=${REPS:-3}
WARMUP=${WARMUP:-5s}
# The window must outlast one request at the highest concurrency (64 x 64
# tokens at ~230 tokens/s is ~18 s on the reference VM), or no request
# starts in it and TTFT goes unmeasured there.
DURATION=${DURATION:-25s}
RAMP=${RAMP:-2s}
MAX_TOKENS=${MAX_TOKENS:-64}
PROMPT_TOKENS=${PROMPT_TOKENS:-32}
PROFILE=${PROFILE:-1}
max_c=0
for c in $CONCURRENCY; do
	if ((c > max_c)); then max_c=$c; fi
done

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
pid=
cleanup() {
	if [[ -n $pid ]]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

model=$tmp/llama-8x512.gguf
bin/vajra tiny-model -o "$model" --layers 8 --dim 512 --heads 8 --kv-heads 4 --ff 1408 --f16

# Port 0 and a profiler on port 0: the server prints where it listens.
# 64 sequences of at most 512 tokens each fit the KV cache (64 x 512), so
# nothing is preempted; the prompt (PROMPT_TOKENS words and the chat
# template) plus MAX_TOKENS must stay under 512.
log=$out/serve.log
"${pin_server[@]}" bin/vajra serve --model "$model" --served-model-name llama-8x512 --threads 1 \
	--host 127.0.0.1 --port 0 --pprof-addr 127.0.0.1:0 \
	--max-num-seqs "$max_c" --max-model-len 512 --kv-cache-tokens $((max_c * 512)) >"$log" 2>&1 &
pid=$!
addr=
for _ in $(seq 1 100); do
	addr=$(sed -n 's|^vajra serving on http://||p' "$log")
	[[ -n $addr ]] && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
if [[ -z $addr ]]; then
	echo "ERROR: vajra serve did not start:" >&2
	cat "$log" >&2
	exit 1
fi
pprof_addr=$(grep 'profiler listening' "$log" | grep -o '127\.0\.0\.1:[0-9]*' | sed -n 1p)
url=http://$addr
echo "server pid $pid on $url, profiler on $pprof_addr"

ticks=$(getconf CLK_TCK)
# proc_cpu: the server's utime+stime (/proc/PID/stat fields 14 and 15,
# counted after the comm field's closing parenthesis), in seconds.
proc_cpu() {
	sed 's/.*) //' "/proc/$pid/stat" | awk -v hz="$ticks" '{ printf "%.2f\n", ($12 + $13) / hz }'
}
# metric NAME: an unlabelled or model-labelled sample of the server's /metrics.
metric() {
	# awk reads to the end: exiting early would kill curl with SIGPIPE,
	# which pipefail turns into a failure.
	curl -sf "$url/metrics" | awk -v n="$1" '!found && ($1 == n || index($1, n "{") == 1) { print $2; found = 1 }'
}

bench_args=(-url "$url" -model llama-8x512 -max-tokens "$MAX_TOKENS" -prompt-tokens "$PROMPT_TOKENS"
	-warmup "$WARMUP" -duration "$DURATION" -ramp "$RAMP" -max-time 3m -server-pid "$pid" -engine-cpu -quiet)

# One warm-up run, not reported: first touches of the weights and the KV
# cache, the prefix cache's first prompt.
GOMAXPROCS=1 "${pin_client[@]}" bin/vajra bench "${bench_args[@]}" -c "$max_c" -warmup 0s -duration 5s >/dev/null

summary=$out/summary.txt
: >"$summary"
for rep in $(seq 1 "$REPS"); do
	for c in $CONCURRENCY; do
		name=run-c$c-r$rep
		cpu0=$(proc_cpu)
		eng0=$(metric vajra_engine_compute_cpu_seconds_total)
		tok0=$(metric vllm:generation_tokens_total)
		GOMAXPROCS=1 "${pin_client[@]}" bin/vajra bench "${bench_args[@]}" -c "$c" -out "$out/$name.json" >"$out/$name.txt"
		# Read the CPU before the scrape, so that the scrape's own CPU is
		# not counted.
		cpu1=$(proc_cpu)
		eng1=$(metric vajra_engine_compute_cpu_seconds_total)
		tok1=$(metric vllm:generation_tokens_total)
		awk -v c="$c" -v rep="$rep" -v cpu0="$cpu0" -v cpu1="$cpu1" -v eng0="$eng0" -v eng1="$eng1" -v tok0="$tok0" -v tok1="$tok1" '
			/^throughput:/ { tps = $2 }
			# No request started in the window: TTFT unmeasured ("na").
			/^ttft / { if ($2 > 0) { ttft50 = $4; ttft99 = $6 } else { ttft50 = ttft99 = "na" } }
			/^gap / { gap50 = $4; gap99 = $6 }
			/^server pid/ { wcpu = $5; sub(/s$/, "", wcpu) }
			/^server engine compute cpu/ { weng = $5; sub(/s;$/, "", weng); wfd = $12; sub(/s,$/, "", wfd); wus = $13; wshare = $15; sub(/%$/, "", wshare) }
			END {
				cpu = cpu1 - cpu0; eng = eng1 - eng0; tok = tok1 - tok0; fd = cpu - eng
				printf "c=%d rep=%d tokens/s=%.1f ttft_p50_ms=%s ttft_p99_ms=%s gap_p50_ms=%.2f gap_p99_ms=%.2f", c, rep, tps, ttft50, ttft99, gap50, gap99
				printf " window: cpu_s=%.3f engine_s=%.3f front_s=%.3f front_us_per_token=%.1f front_share_pct=%.2f", wcpu, weng, wfd, wus, wshare
				printf " run: cpu_s=%.2f engine_s=%.3f tokens=%d front_us_per_token=%.1f front_share_pct=%.2f", cpu, eng, tok, (tok > 0 ? fd * 1e6 / tok : -1), (eng > 0 ? 100 * fd / eng : -1)
				printf " loadavg1=%s\n", load
			}' load="$(cut -d' ' -f1 /proc/loadavg)" "$out/$name.txt" | tee -a "$summary"
	done
done

# thread_cpu: every thread of the server and its on-CPU time (ns, from
# schedstat).
thread_cpu() {
	for t in /proc/"$pid"/task/*; do
		echo "${t##*/} $(cut -d' ' -f1 "$t/schedstat" 2>/dev/null || echo 0)"
	done | sort
}

# Medians over the repetitions, per concurrency.
echo
echo "=== medians of $REPS runs (window: vajra bench's measured window; run: idle to idle)"
for c in $CONCURRENCY; do
	grep "^c=$c " "$summary" | awk -v c="$c" '
		# med: the median of column k over the runs that measured it
		# ("na" where none did).
		function med(k,    n, i, j, t, a) {
			n = 0
			for (i = 1; i <= NR; i++) if (v[i, k] != "na") a[++n] = v[i, k] + 0
			if (n == 0) return "na"
			for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
			return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		}
		{
			sect = ""
			for (i = 1; i <= NF; i++) {
				if ($i == "window:" || $i == "run:") { sect = $i; continue }
				split($i, kv, "=")
				if (kv[2] != "") { v[NR, sect kv[1]] = kv[2]; keys[sect kv[1]] = 1 }
			}
		}
		END {
			printf "c=%d tokens/s %.1f | ttft p50 %s p99 %s ms | gap p50 %.2f p99 %.2f ms", c, med("tokens/s"), med("ttft_p50_ms"), med("ttft_p99_ms"), med("gap_p50_ms"), med("gap_p99_ms")
			printf " | window: server %.3fs engine %.3fs front %.1f us/token %.2f%%", med("window:cpu_s"), med("window:engine_s"), med("window:front_us_per_token"), med("window:front_share_pct")
			printf " | run: front %.1f us/token %.2f%%\n", med("run:front_us_per_token"), med("run:front_share_pct")
		}'
done | tee "$out/medians.txt"

# start_loaded_run c name: a bench run in the background (pid in bpid);
# returns once every stream is running (the server's running count, after
# the ramp). A profile of DURATION from then ends inside the run (WARMUP +
# DURATION, then the drain).
start_loaded_run() {
	GOMAXPROCS=1 "${pin_client[@]}" bin/vajra bench "${bench_args[@]}" -c "$1" -out "$out/$2.json" >"$out/$2.txt" &
	bpid=$!
	local running
	for _ in $(seq 1 600); do
		running=$(metric vllm:num_requests_running)
		[[ ${running%.*} -ge $1 ]] && break
		sleep 0.1
	done
}

if [[ $PROFILE == 1 && -n $pprof_addr ]]; then
	c=$max_c
	secs=${DURATION%s}
	echo
	echo "=== CPU profile of the server at $c streams (${secs}s of the window)"
	start_loaded_run "$c" profile-run
	thread_cpu >"$tmp/threads0"
	curl -sf -o "$out/cpu-c$c.pprof" "http://$pprof_addr/debug/pprof/profile?seconds=$secs"
	thread_cpu >"$tmp/threads1"
	wait "$bpid"
	# Go's profiler samples only what runs on Go's threads with a P and
	# cgo calls; the per-thread clocks show all of it (the engine's thread
	# has the most).
	echo "server threads' CPU over the profile (ms):"
	join "$tmp/threads0" "$tmp/threads1" | awk '{ d = ($3 - $2) / 1e6; if (d >= 1) printf "  tid %s %.0f\n", $1, d }' | sort -k3 -n -r | tee "$out/threads-c$c.txt"
	grep -E '^(throughput|server)' "$out/profile-run.txt"
	# sed -n, not head: head's early exit would fail the pipeline (pipefail).
	go tool pprof -top -nodecount=40 bin/vajra "$out/cpu-c$c.pprof" 2>/dev/null | tee "$out/cpu-c$c.top.txt" | sed -n 1,50p
fi
# PERF=1: the same with perf (cpu-clock, call graphs), which also sees
# what Go's profiler does not: C threads, sysmon, the kernel.
if [[ ${PERF:-0} == 1 ]] && command -v perf >/dev/null; then
	c=$max_c
	secs=${DURATION%s}
	echo
	echo "=== perf record of the server at $c streams (${secs}s of the window)"
	start_loaded_run "$c" perf-run
	perf record -q -e cpu-clock -F 999 -g -p "$pid" -o "$out/perf-c$c.data" -- sleep "$secs" 2>/dev/null || true
	wait "$bpid"
	grep -E '^(throughput|server)' "$out/perf-run.txt"
	perf report -i "$out/perf-c$c.data" --no-children --sort dso,sym --stdio 2>/dev/null |
		grep -E '^ +[0-9.]+%' | sed -n 1,40p | tee "$out/perf-c$c.top.txt"
fi
echo "results: $out/"
