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
echo
$py bench/tokenizer/summarize.py "$out"
echo "raw output: $out"
