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
# Each workload also compares vajra with itself run with --keep-gomaxprocs
# (vajra-keep: GOMAXPROCS stays 1 instead of event loops + 1).
#
# Results (text, JSON, HTML) go to bench/out/. Environment overrides:
#   WARMUP (4s) DURATION (10s) ROUNDS (3) PORT_BASE (18000)
#   MODEL (vajra-sim: the model `vajra serve --sim-*` serves; the
#   reference servers accept any)
#   VAJRA_SERVE_ARGS (extra flags for `vajra serve`), SKIP_VAJRA=1
#   HELD_STREAMS (streams of the held solo: 19500 when the open-file limit
#   is 20,000 or more, else 10000)
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
port_keep=$((PORT_BASE + 3))

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
		start_vajra vajra "$itl"
		# The same with --keep-gomaxprocs: GOMAXPROCS stays 1, so the event
		# loop's P is the only one (see docs/architecture.md).
		start_vajra vajra-keep "$itl" --keep-gomaxprocs
	fi
}

# start_vajra name itl [flags...]: vajra serve on the port of name.
# --sim-prefill-tps 0: the reference servers model no prefill, so neither
# does vajra here; this compares server paths.
start_vajra() {
	local name=$1 itl=$2
	shift 2
	# shellcheck disable=SC2086
	GOMAXPROCS=1 "${pin_server[@]}" bin/vajra serve --port "$(port_of "$name")" --sim-itl "$itl" \
		--max-num-seqs 4096 --sim-prefill-tps 0 "$@" ${VAJRA_SERVE_ARGS:-} >"$out/$name.log" 2>&1 &
	pids+=($!)
	pid_of[$name]=$!
	wait_port "$(port_of "$name")" "$name"
}

port_of() {
	case $1 in
	vajra) echo "$port_vajra" ;;
	floor) echo "$port_floor" ;;
	baseline) echo "$port_baseline" ;;
	vajra-keep) echo "$port_keep" ;;
	esac
}

# compare scenario A B itl args...: A is the reference, B the subject.
compare() {
	local scenario=$1 a=$2 b=$3 itl=$4
	shift 4
	local name="$scenario-$b-vs-$a"
	local extra=()
	if [[ $b == vajra ]]; then
		extra=(-compare-allocs) # vajra's heap allocations per token, from its /metrics
	fi
	echo
	echo "=== $scenario: $b vs $a"
	GOMAXPROCS=1 "${pin_client[@]}" "${bench[@]}" \
		-url "http://127.0.0.1:$(port_of "$a")" -label "$a" -server-pid "${pid_of[$a]}" \
		-compare "http://127.0.0.1:$(port_of "$b")" -compare-label "$b" -compare-pid "${pid_of[$b]}" "${extra[@]}" \
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
		compare "$scenario" vajra-keep vajra "$itl" "$@"
	else
		compare "$scenario" floor baseline "$itl" "$@"
	fi
}

run_scenario stream 20ms -c 1000 -ramp 1s -max-tokens 128 -prompt-tokens 128
run_scenario saturation 0 -c 256 -max-tokens 128 -prompt-tokens 128
run_scenario nonstream 0 -c 64 -stream=false -max-tokens 16 -prompt-tokens 128
cleanup

# vajra alone: --stream-interval, and memory per held stream.
# held_sampler pid name: samples pid's VmRSS and RssAnon (KiB) every 0.1 s
# for the held solo's ramp and window (15 s) and writes to
# $out/solo-name.peak: the largest VmRSS, the idle RssAnon, the largest
# RssAnon and the last (the window's end). RssAnon leaves out the binary's
# file pages, whose residency varies with the page cache, not the load.
held_sampler() {
	local pid=$1 name=$2
	(
		st=/proc/$pid/status
		max=0 amax=0 a=0 a0=$(awk '/^RssAnon/ {print $2}' "$st")
		end=$((SECONDS + 15))
		while ((SECONDS < end)); do
			read -r r a < <(awk '/^VmRSS/ {r=$2} /^RssAnon/ {a=$2} END {print r, a}' "$st" 2>/dev/null)
			if [[ -z $a ]]; then break; fi # the server is gone
			if ((r > max)); then max=$r; fi
			if ((a > amax)); then amax=$a; fi
			# Written every sample: the solo's cleanup may end this early.
			echo "$max $a0 $amax $a" >"$out/solo-$name.peak"
			sleep 0.1
		done
	) &
	pids+=($!)
}
solo() { # name itl vajra-flags -- bench-flags
	local name=$1 itl=$2
	shift 2
	local vflags=()
	while [[ $1 != -- ]]; do vflags+=("$1"); shift; done
	shift
	cleanup
	GOMAXPROCS=1 "${pin_server[@]}" bin/vajra serve --port "$port_vajra" --sim-itl "$itl" \
		--max-num-seqs 12000 --sim-prefill-tps 0 "${vflags[@]}" >"$out/vajra-$name.log" 2>&1 &
	pids+=($!)
	local pid=$!
	wait_port "$port_vajra" vajra
	local idle
	idle=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
	if [[ -n ${solo_hook:-} ]]; then "$solo_hook" "$pid" "$name"; fi
	echo
	echo "=== $name: vajra ${vflags[*]} (idle RSS ${idle} KiB)"
	GOMAXPROCS=1 "${pin_client[@]}" "${bench[@]}" -url "http://127.0.0.1:$port_vajra" -label "vajra $name" \
		-server-pid "$pid" -model "$MODEL" -itl "$itl" -quiet -out "$out/solo-$name.json" "$@" | tee "$out/solo-$name.txt" || true
	echo "idle_rss_kib $idle" >>"$out/solo-$name.txt"
	cleanup
}
if [[ $have_vajra == 1 ]]; then
	solo interval1 20ms -- -c 1000 -ramp 1s -max-tokens 128 -warmup "$WARMUP" -duration "$DURATION" -server-allocs
	solo interval4 20ms --stream-interval 4 -- -c 1000 -ramp 1s -max-tokens 128 -warmup "$WARMUP" -duration "$DURATION" -server-allocs
	# Held streams: HELD_STREAMS of them (19,500 when the open-file limit
	# allows: the server and the client each need one descriptor per stream,
	# plus a reserve; else 10,000), a token every 30 s, started over 5 s.
	# Held: the server's RSS at the window's end (the first rss_end_bytes of
	# the JSON is the server's), all streams open. Ramp peak: the largest RSS
	# sampled (every 0.1 s) from the start to the window's end, the ramp's
	# transient garbage included. The bench's own peak also covers the drain,
	# when every stream ends at once (its 4th token, after 90 s).
	held_n=${HELD_STREAMS:-}
	if [[ -z $held_n ]]; then
		held_n=10000
		if (($(ulimit -n) >= 20000)); then held_n=19500; fi
	fi
	solo_hook=held_sampler
	solo held 30s --max-num-seqs "$held_n" -- -c "$held_n" -ramp 5s -max-tokens 4 -warmup 0s -duration 15s -allow-errors
	solo_hook=
	read -r peak anon0 anonmax anon < <(cat "$out/solo-held.peak" 2>/dev/null || echo)
	drain=$(grep -o 'peak RSS [0-9.]* MiB' "$out/solo-held.txt" | head -1 | awk '{print $3}')
	held=$(grep -o '"rss_end_bytes": *[0-9]*' "$out/solo-held.json" | head -1 | grep -o '[0-9]*$')
	idle=$(awk '/^idle_rss_kib/ {print $2}' "$out/solo-held.txt")
	if [[ -n $peak && -n $drain && -n $held && -n $idle ]]; then
		awk -v n="$held_n" -v p="$peak" -v d="$drain" -v h="$held" -v i="$idle" 'BEGIN { printf "held streams: %d streams, %.2f KiB RSS per stream held ((%.1f MiB - %.1f MiB idle) / %d), %.2f KiB at the peak of the ramp (%.1f MiB), %.2f KiB at the whole run'"'"'s peak (%.1f MiB, when all streams end)\n", n, (h/1024 - i)/n, h/1048576, i/1024, n, (p - i)/n, p/1024, (d*1024 - i)/n, d }' | tee -a "$out/solo-held.txt"
	fi
	if [[ -n $anon && -n $anon0 ]]; then
		awk -v n="$held_n" -v a0="$anon0" -v am="$anonmax" -v a="$anon" 'BEGIN { printf "held streams (anonymous memory): %.2f KiB per stream held ((%.1f MiB - %.1f MiB idle) / %d), %.2f KiB at the peak of the ramp\n", (a - a0)/n, a/1024, a0/1024, n, (am - a0)/n }' | tee -a "$out/solo-held.txt"
	fi
fi

echo
echo "=== summary: B/A ratios (median of rounds); A = reference, B = subject"
for f in "$out"/*-vs-*.txt; do
	echo "--- $(basename "$f" .txt)"
	grep -E '^(tokens/s|requests/s|ttft p99|gap p99 |gap-itl p99|server cpu/token|server cpu/request|server allocs/token|server peak RSS|errors)' "$f" || true
done
for f in "$out"/solo-*.txt; do
	[[ -e $f ]] || continue
	echo "--- $(basename "$f" .txt)"
	grep -E '^(throughput|server|held streams)' "$f" || true
done
echo "reports: $out/*.html"
