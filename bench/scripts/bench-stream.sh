#!/usr/bin/env bash
# bench-stream.sh: the streaming benchmark of issues 6 and 15 (`make bench-stream`).
#
# Builds vajra, the floor (gnet) and baseline (net/http) reference servers
# and the instrument; starts each server pinned to SERVER_CPUS with
# GOMAXPROCS and event loops = the number of those CPUs; runs `vajra bench`
# pinned to CLIENT_CPUS against them, comparing vajra with each reference
# in alternating rounds (A B A B ...), for these workloads (WORKLOADS):
#
#   stream:     1,000 concurrent chat streams, 20 ms inter-token latency,
#               128 tokens each, include_usage, starts spread over 1 s
#   saturation: inter-token latency 0, 256 concurrent streams of 128 tokens
#   nonstream:  16-token non-streaming chat completions on 64 connections
#   ramp:       the knee at 20 ms: the most streams each server holds with a
#               server-added gap p99 <= KNEE_P99 (`vajra bench -ramp-streams`)
#   syscalls:   system calls per token by kind in the stream workload
#               (`vajra bench -syscalls`), in runs of their own because
#               counting them costs the server CPU
#   solo:       vajra alone: --stream-interval, memory per held stream
#
# Each comparison workload also compares vajra with itself run with
# --keep-gomaxprocs (vajra-keep: no spare P), and the stream workload with
# --io-uring=off (vajra-write: one write(2) per connection, when
# `vajra serve -h` has the flag).
#
# Results (text, JSON, HTML) go to bench/out/; the summary at the end gives
# vajra/floor per workload against issue 15's targets. Environment overrides:
#   WARMUP (4s) DURATION (10s) ROUNDS (3) PORT_BASE (18000)
#   SERVER_CPUS (0) CLIENT_CPUS (1): CPU lists for taskset (e.g. 0-3,8)
#   WORKLOADS ("stream saturation nonstream ramp syscalls solo"): a subset
#   RAMP_STREAMS (500:16000: doubling, then bisecting; FROM:TO:STEP steps)
#   RAMP_WARMUP (3s) RAMP_HOLD (3s): each ramp level's settle and window
#   KNEE_P99 (5ms)  SYSCALLS (auto: perf, else /proc/PID/io)
#   SYSCALL_DURATION (5s): window of the syscall-counting runs
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
rm -f "$out"/*-vs-*.txt "$out"/*-vs-*.json "$out"/*-vs-*.html "$out"/ramp.* "$out"/solo-*

WARMUP=${WARMUP:-4s}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
MODEL=${MODEL:-vajra-sim}
PORT_BASE=${PORT_BASE:-18000}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
WORKLOADS=${WORKLOADS:-stream saturation nonstream ramp syscalls solo}
RAMP_STREAMS=${RAMP_STREAMS:-500:16000}
RAMP_WARMUP=${RAMP_WARMUP:-3s}
RAMP_HOLD=${RAMP_HOLD:-3s}
KNEE_P99=${KNEE_P99:-5ms}
SYSCALLS=${SYSCALLS:-auto}
SYSCALL_DURATION=${SYSCALL_DURATION:-5s}
port_vajra=$PORT_BASE
port_floor=$((PORT_BASE + 1))
port_baseline=$((PORT_BASE + 2))
port_keep=$((PORT_BASE + 3))
port_write=$((PORT_BASE + 4))

want() { [[ " $WORKLOADS " == *" $1 "* ]]; }

# cpu_list LIST: the CPUs of a taskset list such as 0-3,8, one a line.
cpu_list() {
	local part
	IFS=, read -ra parts <<<"$1"
	for part in "${parts[@]}"; do
		if [[ $part =~ ^([0-9]+)-([0-9]+)$ ]] && ((BASH_REMATCH[2] >= BASH_REMATCH[1])); then
			seq "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
		elif [[ $part =~ ^[0-9]+$ ]]; then
			echo "$part"
		else
			echo "ERROR: bad CPU list '$1'" >&2
			return 1
		fi
	done | sort -un
}
server_cpu_list=$(cpu_list "$SERVER_CPUS")
client_cpu_list=$(cpu_list "$CLIENT_CPUS")
server_ncpu=$(wc -l <<<"$server_cpu_list")
client_ncpu=$(wc -l <<<"$client_cpu_list")

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
# vajra-write (vajra with --io-uring=off) runs when vajra has the flag.
# (The help is read whole: grep -q closing the pipe early would fail it
# under pipefail.)
have_write=0
serve_help=$(bin/vajra serve -h 2>&1 || true)
if [[ $have_vajra == 1 && $serve_help == *"-io-uring"* ]]; then
	have_write=1
fi

pin_server=()
pin_client=()
if command -v taskset >/dev/null && taskset -c "$SERVER_CPUS" true 2>/dev/null && taskset -c "$CLIENT_CPUS" true 2>/dev/null; then
	pin_server=(taskset -c "$SERVER_CPUS")
	pin_client=(taskset -c "$CLIENT_CPUS")
	echo "server CPUs $SERVER_CPUS ($server_ncpu), client CPUs $CLIENT_CPUS ($client_ncpu), of $(nproc) online"
	if [[ -n $(comm -12 <(echo "$server_cpu_list") <(echo "$client_cpu_list")) ]]; then
		echo "WARNING: server and client share CPUs: the figures measure both" >&2
	fi
else
	echo "WARNING: taskset, or CPUs $SERVER_CPUS / $CLIENT_CPUS, missing: not pinning" >&2
fi
# Servers: GOMAXPROCS and event loops = the server CPUs (vajra raises
# GOMAXPROCS by one itself, its spare P); the instrument: GOMAXPROCS = the
# client CPUs.
srv_env=(env GOMAXPROCS="$server_ncpu")
cli_env=(env GOMAXPROCS="$client_ncpu")

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
	"${srv_env[@]}" "${pin_server[@]}" "$out/bin/floor" -port "$port_floor" -itl "$itl" -loops "$server_ncpu" 2>"$out/floor.log" &
	pids+=($!)
	pid_of[floor]=$!
	"${srv_env[@]}" "${pin_server[@]}" "$out/bin/baseline" -port "$port_baseline" -itl "$itl" 2>"$out/baseline.log" &
	pids+=($!)
	pid_of[baseline]=$!
	wait_port "$port_floor" floor
	wait_port "$port_baseline" baseline
	if [[ $have_vajra == 1 ]]; then
		start_vajra vajra "$itl"
		# The same with --keep-gomaxprocs: GOMAXPROCS stays at the server
		# CPUs, so the event loops' Ps are the only ones (see
		# docs/architecture.md).
		start_vajra vajra-keep "$itl" --keep-gomaxprocs
		if [[ $have_write == 1 ]]; then
			start_vajra vajra-write "$itl" --io-uring=off
		fi
	fi
}

# vajra's engine limits: 4,096 sequences for the fixed workloads; the ramp
# raises them so that the engine never queues (16 prompt and output blocks
# per 128 + 128 token stream, the prompt's shared by prefix caching).
vajra_limits=(--max-num-seqs 4096)

# start_vajra name itl [flags...]: vajra serve on the port of name.
# --sim-prefill-tps 0: the reference servers model no prefill, so neither
# does vajra here; this compares server paths.
start_vajra() {
	local name=$1 itl=$2
	shift 2
	# shellcheck disable=SC2086
	"${srv_env[@]}" "${pin_server[@]}" bin/vajra serve --port "$(port_of "$name")" --sim-itl "$itl" \
		--event-loops "$server_ncpu" "${vajra_limits[@]}" --sim-prefill-tps 0 "$@" ${VAJRA_SERVE_ARGS:-} >"$out/$name.log" 2>&1 &
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
	vajra-write) echo "$port_write" ;;
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
	"${cli_env[@]}" "${pin_client[@]}" "${bench[@]}" \
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
		if [[ $scenario == stream && $have_write == 1 ]]; then
			compare "$scenario" vajra-write vajra "$itl" "$@"
		fi
	else
		compare "$scenario" floor baseline "$itl" "$@"
	fi
}

stream_args=(-c 1000 -ramp 1s -max-tokens 128 -prompt-tokens 128)
want stream && run_scenario stream 20ms "${stream_args[@]}"
want saturation && run_scenario saturation 0 -c 256 -max-tokens 128 -prompt-tokens 128
want nonstream && run_scenario nonstream 0 -c 64 -stream=false -max-tokens 16 -prompt-tokens 128

# The knee at 20 ms: every server's ramp, their levels in alternation.
if want ramp; then
	vajra_limits=(--max-num-seqs 20000 --kv-cache-tokens 4194304)
	start_servers 20ms
	ramp_servers=(floor)
	if [[ $have_vajra == 1 ]]; then
		ramp_servers+=(vajra)
		[[ $have_write == 1 ]] && ramp_servers+=(vajra-write)
	else
		ramp_servers+=(baseline)
	fi
	ramp_args=(-url "http://127.0.0.1:$port_floor" -label floor -server-pid "${pid_of[floor]}")
	for s in "${ramp_servers[@]:1}"; do
		ramp_args+=(-compare "http://127.0.0.1:$(port_of "$s")" -compare-label "$s" -compare-pid "${pid_of[$s]}")
	done
	echo
	echo "=== ramp: knee of ${ramp_servers[*]} at 20 ms (server-added gap p99 <= $KNEE_P99), streams $RAMP_STREAMS"
	"${cli_env[@]}" "${pin_client[@]}" "${bench[@]}" "${ramp_args[@]}" -model "$MODEL" -itl 20ms \
		-ramp-streams "$RAMP_STREAMS" -knee-p99 "$KNEE_P99" -warmup "$RAMP_WARMUP" -duration "$RAMP_HOLD" \
		-ramp 1s -max-tokens 128 -prompt-tokens 128 -out "$out/ramp.json" -html "$out/ramp.html" | tee "$out/ramp.txt" || true
	vajra_limits=(--max-num-seqs 4096)
fi

# System calls per token in the stream workload, counted in runs of their
# own (perf's tracepoints slow each system call a little).
if want syscalls; then
	start_servers 20ms
	if [[ $have_vajra == 1 ]]; then
		ROUNDS=1 DURATION=$SYSCALL_DURATION compare syscalls floor vajra 20ms "${stream_args[@]}" -syscalls "$SYSCALLS"
		if [[ $have_write == 1 ]]; then
			ROUNDS=1 DURATION=$SYSCALL_DURATION compare syscalls vajra-write vajra 20ms "${stream_args[@]}" -syscalls "$SYSCALLS"
		fi
	else
		ROUNDS=1 DURATION=$SYSCALL_DURATION compare syscalls floor baseline 20ms "${stream_args[@]}" -syscalls "$SYSCALLS"
	fi
fi
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
	"${srv_env[@]}" "${pin_server[@]}" bin/vajra serve --port "$port_vajra" --sim-itl "$itl" --event-loops "$server_ncpu" \
		--max-num-seqs 12000 --sim-prefill-tps 0 "${vflags[@]}" >"$out/vajra-$name.log" 2>&1 &
	pids+=($!)
	local pid=$!
	wait_port "$port_vajra" vajra
	local idle
	idle=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
	if [[ -n ${solo_hook:-} ]]; then "$solo_hook" "$pid" "$name"; fi
	echo
	echo "=== $name: vajra ${vflags[*]} (idle RSS ${idle} KiB)"
	"${cli_env[@]}" "${pin_client[@]}" "${bench[@]}" -url "http://127.0.0.1:$port_vajra" -label "vajra $name" \
		-server-pid "$pid" -model "$MODEL" -itl "$itl" -quiet -out "$out/solo-$name.json" "$@" | tee "$out/solo-$name.txt" || true
	echo "idle_rss_kib $idle" >>"$out/solo-$name.txt"
	cleanup
}
if [[ $have_vajra == 1 ]] && want solo; then
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
	[[ -e $f ]] || continue
	echo "--- $(basename "$f" .txt)"
	grep -E '^(tokens/s|requests/s|ttft p99|gap p99 |gap-itl p99|server cpu/token|server cpu/request|server allocs/token|server peak RSS|errors|server syscalls/token|syscalls/token)' "$f" || true
done
for f in "$out"/solo-*.txt; do
	[[ -e $f ]] || continue
	echo "--- $(basename "$f" .txt)"
	grep -E '^(throughput|server|held streams)' "$f" || true
done
if [[ -e $out/ramp.txt ]]; then
	echo "--- ramp"
	grep -E '^knee' "$out/ramp.txt" || true
fi

# fig FILE NAME: "A B B/A" of one figure of a comparison's text report
# (nothing when the file or the figure is missing).
fig() {
	[[ -e $1 ]] || return 0
	awk -v n="$2" 'index($0, n " ") == 1 {
		rest = substr($0, length(n) + 1); split(rest, f, " "); i = 1
		if (f[1] ~ /^\(/) i = 2
		print f[i], f[i + 1], f[i + 2]; exit
	}' "$1"
}
# verdict VALUE OP TARGET: met, MISSED, or not measured.
verdict() {
	awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN {
		if (v == "" || v == "n/a") { print "not measured"; exit }
		ok = (op == "<=") ? (v + 0 <= t + 0) : (v + 0 >= t + 0)
		print (ok ? "met" : "MISSED")
	}'
}
# knee NAME: the knee of NAME in the ramp's text report.
knee() {
	[[ -e $out/ramp.txt ]] || return 0
	awk -v n="$1" '$1 == "knee" && $2 == n ":" { print ($3 ~ /^[0-9]+$/ ? $3 : 0); exit }' "$out/ramp.txt"
}
per_core() { # value
	awk -v v="$1" -v n="$server_ncpu" 'BEGIN { if (v == "" || v == "n/a") print "n/a"; else printf "%.0f", v / n }'
}

if [[ $have_vajra == 1 ]]; then
	echo
	echo "=== issue 15 targets: vajra against the floor, measured in this run ($server_ncpu server core(s): $SERVER_CPUS; client: $CLIENT_CPUS)"
	read -r a b r < <(fig "$out/stream-vajra-vs-floor.txt" "server cpu/token"; echo)
	printf '%-58s vajra %s, floor %s µs: vajra/floor %s (target <= 0.50): %s\n' "stream 1,000 x 20 ms, server CPU per token:" \
		"${b:-n/a}" "${a:-n/a}" "${r:-n/a}" "$(verdict "${r:-}" "<=" 0.5)"
	read -r a b r < <(fig "$out/stream-vajra-vs-floor.txt" "gap-itl p99"; echo)
	d=$(awk -v a="${a:-}" -v b="${b:-}" 'BEGIN { if (a == "" || b == "") print "n/a"; else printf "%+.3f", b - a }')
	printf '%-58s vajra %s, floor %s ms: vajra - floor %s ms (target <= +1): %s\n' "stream 1,000 x 20 ms, server-added ITL p99:" \
		"${b:-n/a}" "${a:-n/a}" "$d" "$(verdict "$d" "<=" 1)"
	kv=$(knee vajra) kf=$(knee floor)
	kr=$(awk -v a="${kf:-}" -v b="${kv:-}" 'BEGIN { if (a == "" || b == "" || a == 0) print "n/a"; else printf "%.3f", b / a }')
	printf '%-58s vajra %s, floor %s streams: vajra/floor %s (target vajra >= 4000): %s\n' "knee at 20 ms ITL, server-added p99 <= $KNEE_P99:" \
		"${kv:-n/a}" "${kf:-n/a}" "$kr" "$(verdict "${kv:-}" ">=" 4000)"
	if grep -q 'knee may be the client' "$out/ramp.txt" 2>/dev/null; then
		echo "  (a knee was client-bound: the instrument used its whole core there; see $out/ramp.txt)"
	fi
	read -r a b r < <(fig "$out/nonstream-vajra-vs-floor.txt" "requests/s"; echo)
	printf '%-58s vajra %s, floor %s req/s: vajra/floor %s (target >= 0.65): %s\n' "non-streamed 16-token chat, requests/s:" \
		"${b:-n/a}" "${a:-n/a}" "${r:-n/a}" "$(verdict "${r:-}" ">=" 0.65)"
	read -r a b r < <(fig "$out/syscalls-vajra-vs-floor.txt" "server syscalls/token"; echo)
	printf '%-58s vajra %s, floor %s: vajra/floor %s\n' "stream, system calls per token:" "${b:-n/a}" "${a:-n/a}" "${r:-n/a}"
	if [[ -e $out/syscalls-vajra-vs-floor.txt ]]; then
		grep -E '^syscalls/token' "$out/syscalls-vajra-vs-floor.txt" | awk '{ printf "  %-24s floor %s, vajra %s\n", $2, $3, $4 }'
	fi

	echo
	echo "=== vajra/floor by workload (median of per-round ratios)"
	for w in stream saturation nonstream; do
		f="$out/$w-vajra-vs-floor.txt"
		[[ -e $f ]] || continue
		line="$w:"
		for name in "tokens/s" "requests/s" "server cpu/token" "server cpu/request" "gap-itl p99"; do
			read -r a b r < <(fig "$f" "$name"; echo)
			[[ -n ${r:-} && $r != n/a ]] && line+=" $name ${r}x;"
		done
		echo "$line"
	done
	if [[ -n ${kr:-} && $kr != n/a ]]; then
		echo "ramp: knee ${kr}x"
	fi

	if [[ -e $out/stream-vajra-vs-vajra-write.txt ]]; then
		echo
		echo "=== batched sends: vajra (io_uring auto) against vajra-write (--io-uring=off), stream workload"
		for name in "server cpu/token" "gap-itl p99"; do
			read -r a b r < <(fig "$out/stream-vajra-vs-vajra-write.txt" "$name"; echo)
			echo "$name: vajra ${b:-n/a}, vajra-write ${a:-n/a}: ratio ${r:-n/a}"
		done
		read -r a b r < <(fig "$out/syscalls-vajra-vs-vajra-write.txt" "server syscalls/token"; echo)
		echo "syscalls/token: vajra ${b:-n/a}, vajra-write ${a:-n/a}"
		kw=$(knee vajra-write)
		echo "knee: vajra ${kv:-n/a}, vajra-write ${kw:-n/a} streams"
	elif [[ $have_write == 0 ]]; then
		echo
		echo "(no vajra-write: bin/vajra serve has no --io-uring flag)"
	fi

	echo
	echo "=== per server core ($server_ncpu)"
	read -r a b r < <(fig "$out/saturation-vajra-vs-floor.txt" "tokens/s"; echo)
	echo "saturation tokens/s per server core: vajra $(per_core "${b:-}"), floor $(per_core "${a:-}")"
	echo "knee streams per server core at 20 ms: vajra $(per_core "${kv:-}"), floor $(per_core "${kf:-}")"
	if ((server_ncpu + client_ncpu > $(nproc))) || ((server_ncpu == 1)); then
		echo "(with $server_ncpu server core(s) and $client_ncpu client core(s) of $(nproc), scaling across event loops is not measured here: run with SERVER_CPUS=0-3 CLIENT_CPUS=4-7 or the like on a bigger machine)"
	fi
fi
echo "reports: $out/*.html"
