#!/usr/bin/env bash
# Encode speed of engine/tokenizer against Hugging Face tokenizers (PyPI
# tokenizers 0.23.3, Python, one string per encode call, Rayon limited to
# one thread) on the same 8 KB prompts, both pinned to one core, in
# interleaved rounds (Go, HF, Go, HF, ...) so that drift in the machine's
# speed hits both alike. Needs make tokenizers and the venv .venv-tok
# (make tokenizer-golden makes it). Usage, from the repository root:
#   bench/tokenizer/compare.sh [ROUNDS] [SECONDS] [CPU]
set -euo pipefail
rounds=${1:-3} secs=${2:-2} cpu=${3:-1}
py=.venv-tok/bin/python
[[ -x $py ]] || { python3 -m venv .venv-tok; $py -m pip install -q tokenizers==0.23.3; }
mkdir -p bench/out
out=bench/out/tokenizer-$(date -u +%Y%m%dT%H%M%SZ).txt
bin=$(mktemp -d)/tokenizer.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" ./engine/tokenizer/
echo "commit $(git rev-parse --short HEAD), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), pinned to CPU $cpu" | tee "$out"
for r in $(seq "$rounds"); do
	echo "## round $r" | tee -a "$out"
	(cd engine/tokenizer && GOMAXPROCS=1 taskset -c "$cpu" "$bin" -test.run '^$' -test.bench '^BenchmarkEncode$' \
		-test.benchtime "${secs}s" -test.cpu 1) | grep '^Benchmark' | tee -a "$out"
	RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false taskset -c "$cpu" \
		$py bench/tokenizer/hf_bench.py .tokenizers engine/tokenizer/testdata "$secs" | tee -a "$out"
done
$py - "$out" <<'PY'
import re, statistics, sys
rounds, cur = [], None
for line in open(sys.argv[1]):
    if line.startswith("## round"):
        cur = {}; rounds.append(cur); continue
    m = re.match(r"(?:BenchmarkEncode/|HF/)(\S+?)(?:-\d+)?\s+\d+\s+(\d+(?:\.\d+)?) ns/op", line)
    if m and cur is not None:
        cur[("HF" if line.startswith("HF/") else "Go", m.group(1))] = float(m.group(2))
names = sorted({k[1] for r in rounds for k in r})
print("\n| tokenizer/prompt | Go ns/op (median) | HF ns/op (median) | HF/Go per round | median |")
print("|---|---|---|---|---|")
for n in names:
    go = [r[("Go", n)] for r in rounds if ("Go", n) in r and ("HF", n) in r]
    hf = [r[("HF", n)] for r in rounds if ("Go", n) in r and ("HF", n) in r]
    ratios = [h / g for g, h in zip(go, hf)]
    print(f"| {n} | {statistics.median(go):,.0f} | {statistics.median(hf):,.0f} | {', '.join(f'{x:.1f}' for x in ratios)} | **{statistics.median(ratios):.1f}×** |")
PY
echo "raw output: $out"
