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
#
# Side by side with llama-server (same release, same model file), in one
# run, alternating the two servers within every repetition:
#
#   bench-llama.sh compare   closed-loop streams at each of CONCURRENCY
#                            ("1 8 64 128"), Vajra with its defaults against
#                            llama-server with -np 64 -c 65536: tokens/s,
#                            inter-token gap p50/p99, TTFT, the server's RSS
#                            and CPU, and the ratios.
#   bench-llama.sh arrivals  ARRIVE_STREAMS (24) streams decoding while
#                            ARRIVE_N (20) prompts of ARRIVE_PROMPT (300)
#                            words (about 800 tokens of the 8x512 model's
#                            byte-level vocabulary, the chat template
#                            included) arrive at ARRIVE_RATE (4) per second,
#                            each prompt unique (no prefix cache holds it):
#                            the running streams' gap p99, both servers.
#   bench-llama.sh logprobs  Vajra alone: 8 streams' gaps alone, with a
#                            ninth client, and with a ninth asking for
#                            top-5 logprobs.
#
# EXTRA_BODY='{"skip_special_tokens":false}' adds those fields to every
# request of the compare mode's runs (vajra bench -extra-body), for both
# servers: llama-server streams the text of a real model's special tokens,
# Vajra (as vLLM) leaves them out unless asked. Vajra (as vLLM) still sends
# such a token's chunk, with empty content; vajra bench counts only chunks
# with text unless EVERY_CHUNK=1 (vajra bench -every-chunk: every chunk
# with content, empty or not, is a token, as vllm bench serve counts them).
#
# MODEL=path benchmarks that GGUF instead of the 8x512 model (e.g. the
# SmolLM2-135M-Instruct Q4_1 file); LLAMA_SERVER=path picks the binary
# (default: .llama/server/bin/llama-server, `make llama-server`). Both
# servers are unpinned (each uses every core, as by default); the client
# runs with GOMAXPROCS=1. The machine's load average is printed per run.
set -euo pipefail

MODE=${1:-frontdoor}
if [[ $MODE == compare || $MODE == arrivals || $MODE == logprobs ]]; then
	root=$(cd "$(dirname "$0")/../.." && pwd)
	cd "$root"
	out=bench/out/llama-$MODE
	mkdir -p "$out"
	# The logs too: the server's address is read from its log, which the
	# background start truncates only later.
	rm -f "$out"/*.txt "$out"/*.json "$out"/*.log
	echo "building..."
	go build -o bin/vajra ./cmd/vajra
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
	model=${MODEL:-}
	if [[ -z $model ]]; then
		model=$tmp/llama-8x512.gguf
		bin/vajra tiny-model -o "$model" --layers 8 --dim 512 --heads 8 --kv-heads 4 --ff 1408 --f16
	fi
	name=$(basename "$model" .gguf)
	# Vajra with its defaults.
	vlog=$out/vajra.log
	vajra_cmd=(bin/vajra serve --model "$model" --served-model-name "$name" --host 127.0.0.1 --port 0 ${VAJRA_FLAGS:-})
	"${vajra_cmd[@]}" >"$vlog" 2>&1 &
	vpid=$!
	pids+=("$vpid")
	vaddr=
	for _ in $(seq 1 300); do
		vaddr=$(sed -n 's|^vajra serving on http://||p' "$vlog")
		[[ -n $vaddr ]] && break
		kill -0 "$vpid" 2>/dev/null || break
		sleep 0.1
	done
	[[ -n $vaddr ]] || { echo "ERROR: vajra serve did not start:" >&2; cat "$vlog" >&2; exit 1; }
	echo "vajra:        ${vajra_cmd[*]}"
	echo "              pid $vpid on http://$vaddr"
	grep -o '"kv_cache_tokens":[0-9]*,"kv_unified":[a-z]*,"threads":[0-9]*' "$vlog" | sed -n 1p | sed 's/^/              /' || true
	lpid=
	laddr=
	if [[ $MODE != logprobs ]]; then
		lbin=${LLAMA_SERVER:-.llama/server/bin/llama-server}
		[[ -x $lbin ]] || lbin=/work/main/.llama/server/bin/llama-server
		[[ -x $lbin ]] || { echo "ERROR: no llama-server: run make llama-server, or set LLAMA_SERVER" >&2; exit 1; }
		lport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
		llog=$out/llama-server.log
		llama_cmd=("$lbin" -m "$model" --host 127.0.0.1 --port "$lport" --no-webui --metrics ${LLAMA_FLAGS:--np 64 -c 65536})
		LD_LIBRARY_PATH=$(dirname "$lbin")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "${llama_cmd[@]}" >"$llog" 2>&1 &
		lpid=$!
		pids+=("$lpid")
		for _ in $(seq 1 600); do
			curl -sf "http://127.0.0.1:$lport/health" >/dev/null 2>&1 && laddr=127.0.0.1:$lport && break
			kill -0 "$lpid" 2>/dev/null || break
			sleep 0.1
		done
		[[ -n $laddr ]] || { echo "ERROR: llama-server did not start:" >&2; tail -20 "$llog" >&2; exit 1; }
		echo "llama-server: ${llama_cmd[*]}"
		echo "              pid $lpid on http://$laddr"
	fi
	rss() { awk '/^VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }
	# quiet: wait (at most 20 s) until the machine is idle, under a fifth
	# of a core busy over half a second, so that no run is charged with
	# the previous one's leftovers: after its client aborts (-no-drain),
	# llama-server goes on computing the aborted requests for 0.7-2.3 s
	# (both cores), where Vajra stops them at once.
	# /proc/stat counts clock ticks (getconf CLK_TCK a second): a fifth of
	# a core over half a second is CLK_TCK/10 of them.
	busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
	idle_ticks=$(($(getconf CLK_TCK) / 10))
	quiet() {
		local a b
		for _ in $(seq 1 40); do
			a=$(busy)
			sleep 0.5
			b=$(busy)
			(((b - a) < idle_ticks)) && return 0
		done
		echo "WARNING: the machine did not go idle before the run" >&2
	}
	# one TAG URL PID OUT ARGS...: one vajra bench run, its summary line.
	one() {
		local tag=$1 u=$2 p=$3 o=$4
		shift 4
		GOMAXPROCS=1 bin/vajra bench -url "http://$u" -model "$name" -server-pid "$p" -quiet -max-time 2m \
			${EXTRA_BODY:+-extra-body "$EXTRA_BODY"} ${EVERY_CHUNK:+-every-chunk} "$@" -out "$o.json" >"$o.txt" || true
		awk -v tag="$tag" -v rss="$(rss "$p")" -v load="$(cut -d' ' -f1 /proc/loadavg)" '
			/^throughput:/ { tps = $2 }
			/^ttft / { ttft50 = $4; ttft99 = $6 }
			/^gap / { gap50 = $4; gap99 = $6 }
			# CPU per token of the server: what the load of other processes
			# moves least.
			/^server pid/ { cpu = $5; sub(/s$/, "", cpu); cpt = $11 }
			END { printf "%-6s tokens/s=%.1f gap_p50_ms=%s gap_p99_ms=%s ttft_p50_ms=%s ttft_p99_ms=%s cpu_s=%s cpu_us_per_token=%s rss_mb=%s loadavg1=%s\n", tag, tps, gap50, gap99, ttft50, ttft99, cpu, cpt, rss, load }' "$o.txt"
	}
	WARMUP=${WARMUP:-2s}
	DURATION=${DURATION:-8s}
	MAX_TOKENS=${MAX_TOKENS:-64}
	PROMPT_TOKENS=${PROMPT_TOKENS:-32}
	summary=$out/summary.txt
	: >"$summary"
	case $MODE in
	compare)
		# Warm both (weights, first prompt).
		one warm "$vaddr" "$vpid" "$tmp/w" -c 8 -warmup 0s -duration 2s -max-tokens 16 >/dev/null
		one warm "$laddr" "$lpid" "$tmp/w" -c 8 -warmup 0s -duration 2s -max-tokens 16 >/dev/null
		for rep in $(seq 1 "${REPS:-1}"); do
			for c in ${CONCURRENCY:-1 8 64 128}; do
				args=(-c "$c" -warmup "$WARMUP" -duration "$DURATION" -ramp 1s -no-drain -max-tokens "$MAX_TOKENS" -prompt-tokens "$PROMPT_TOKENS")
				# Alternate which server goes first.
				if (((rep + c) % 2)); then order="v l"; else order="l v"; fi
				for w in $order; do
					quiet
					if [[ $w == v ]]; then
						one vajra "$vaddr" "$vpid" "$out/c$c-r$rep-vajra" "${args[@]}"
					else
						one llama "$laddr" "$lpid" "$out/c$c-r$rep-llama" "${args[@]}"
					fi | sed "s/^/c=$c rep=$rep /" | tee -a "$summary"
				done
			done
		done
		echo
		echo "=== Vajra / llama-server per run (tokens/s ratio; gap p99 ratio, lower is better)"
		awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] } k = f["c"] " " f["rep"]
			if ($3 == "vajra") { vt[k] = f["tokens/s"]; vg[k] = f["gap_p99_ms"]; vr[k] = f["rss_mb"]; vc[k] = f["cpu_us_per_token"] } else { lt[k] = f["tokens/s"]; lg[k] = f["gap_p99_ms"]; lr[k] = f["rss_mb"]; lc[k] = f["cpu_us_per_token"] }
			keys[k] = 1 }
			END { for (k in keys) if (lt[k] > 0 && lg[k] > 0 && lc[k] > 0) printf "c=%s tokens/s %.2fx gap_p99 %.2fx cpu/token %.2fx (vajra %.0f vs %.0f tokens/s, %.1f vs %.1f ms, %.0f vs %.0f us/token; rss %s vs %s MB)\n", k, vt[k] / lt[k], vg[k] / lg[k], vc[k] / lc[k], vt[k], lt[k], vg[k], lg[k], vc[k], lc[k], vr[k], lr[k] }' "$summary" | sort -t= -k2 -n | tee "$out/ratios.txt"
		;;
	arrivals)
		streams=${ARRIVE_STREAMS:-24}
		for rep in $(seq 1 "${REPS:-1}"); do
			if ((rep % 2)); then order="v l"; else order="l v"; fi
			for w in $order; do
				quiet
				if [[ $w == v ]]; then u=$vaddr p=$vpid t=vajra; else u=$laddr p=$lpid t=llama; fi
				# The decoding streams: long answers, measured over the
				# arrivals' span; the arrivals start once they run.
				GOMAXPROCS=1 bin/vajra bench -url "http://$u" -model "$name" -quiet -max-time 2m -c "$streams" -ramp 1s \
					-warmup 3s -duration "${ARRIVE_WINDOW:-6s}" -no-drain -max-tokens 1024 -prompt-tokens "$PROMPT_TOKENS" \
					-out "$out/arr-r$rep-$t-streams.json" >"$out/arr-r$rep-$t-streams.txt" &
				bp=$!
				sleep 3
				GOMAXPROCS=1 bin/vajra bench -url "http://$u" -model "$name" -quiet -max-time 2m -rate "${ARRIVE_RATE:-4}" \
					-n "${ARRIVE_N:-20}" -warmup 0s -unique-prompts -prompt-tokens "${ARRIVE_PROMPT:-300}" -max-tokens 8 \
					-out "$out/arr-r$rep-$t-prompts.json" >"$out/arr-r$rep-$t-prompts.txt" || true
				wait "$bp" || true
				awk -v tag="$t" -v rep="$rep" -v rss="$(rss "$p")" -v load="$(cut -d' ' -f1 /proc/loadavg)" '
					FNR == 1 { file++ }
					file == 1 && /^throughput:/ { tps = $2 }
					file == 1 && /^gap / { gap50 = $4; gap99 = $6 }
					file == 2 && /^requests:/ { reqs = $0 }
					file == 2 && /^ttft / { ttft50 = $4; ttft99 = $6 }
					END { printf "rep=%d %-6s running streams: tokens/s=%.1f gap_p50_ms=%s gap_p99_ms=%s | arrivals: ttft_p50_ms=%s ttft_p99_ms=%s (%s) rss_mb=%s loadavg1=%s\n", rep, tag, tps, gap50, gap99, ttft50, ttft99, reqs, rss, load }' \
					"$out/arr-r$rep-$t-streams.txt" "$out/arr-r$rep-$t-prompts.txt" | tee -a "$summary"
			done
		done
		;;
	logprobs)
		for rep in $(seq 1 "${REPS:-2}"); do
			# 0: the 8 streams alone; 1: a ninth client without logprobs (the
			# control: one more stream, one more client process); 2: the
			# ninth asks for top-5 logprobs.
			for lp in 0 1 2; do
				quiet
				GOMAXPROCS=1 bin/vajra bench -url "http://$vaddr" -model "$name" -quiet -max-time 2m -c 8 -ramp 1s \
					-warmup "$WARMUP" -duration "$DURATION" -no-drain -max-tokens "$MAX_TOKENS" -prompt-tokens "$PROMPT_TOKENS" \
					-out "$out/lp-r$rep-$lp.json" >"$out/lp-r$rep-$lp.txt" &
				bp=$!
				lpp=
				if ((lp)); then
					GOMAXPROCS=1 bin/vajra bench -url "http://$vaddr" -model "$name" -quiet -max-time 2m -c 1 -top-logprobs $(((lp - 1) * 5)) \
						-warmup "$WARMUP" -duration "$DURATION" -no-drain -max-tokens "$MAX_TOKENS" -prompt-tokens "$PROMPT_TOKENS" \
						-out "$out/lp-r$rep-client.json" >"$out/lp-r$rep-client.txt" &
					lpp=$!
				fi
				wait "$bp" || true
				[[ -n $lpp ]] && { wait "$lpp" || true; }
				awk -v rep="$rep" -v lp="$lp" -v load="$(cut -d' ' -f1 /proc/loadavg)" '
					/^throughput:/ { tps = $2 } /^gap / { gap50 = $4; gap99 = $6 }
					END { printf "rep=%d logprobs_client=%d the 8 streams: tokens/s=%.1f gap_p50_ms=%s gap_p99_ms=%s loadavg1=%s\n", rep, lp, tps, gap50, gap99, load }' "$out/lp-r$rep-$lp.txt" | tee -a "$summary"
			done
		done
		;;
	esac
	echo "results: $out/"
	exit 0
fi

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
