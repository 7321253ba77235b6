#!/usr/bin/env python3
"""Summarizes a bench/tokenizer/compare.sh output file: per tokenizer and
prompt, the median ns/op and tokens/s of Go and of Hugging Face, and the
HF/Go time ratio of each round (Go and HF ran back to back in a round)."""
import re
import statistics
import sys

rounds, cur = [], None
for line in open(sys.argv[1]):
    if line.startswith("## round"):
        cur = {}
        rounds.append(cur)
        continue
    m = re.match(r"(?:BenchmarkEncode/|HF/)(\S+?)(?:-\d+)?\s+\d+\s+(\d+(?:\.\d+)?) ns/op.*?(\d+(?:\.\d+)?) tokens/s", line)
    if m and cur is not None:
        side = "HF" if line.startswith("HF/") else "Go"
        cur[(side, m.group(1))] = (float(m.group(2)), float(m.group(3)))
names = sorted({k[1] for r in rounds for k in r})
print("| tokenizer/prompt | Go ns/op | Go tokens/s | HF ns/op | HF tokens/s | HF/Go time, per round | median |")
print("|---|---|---|---|---|---|---|")
for n in names:
    both = [r for r in rounds if ("Go", n) in r and ("HF", n) in r]
    go = [r[("Go", n)] for r in both]
    hf = [r[("HF", n)] for r in both]
    ratios = [h[0] / g[0] for g, h in zip(go, hf)]
    med = lambda xs: statistics.median(xs)
    print(f"| {n} | {med([g[0] for g in go]):,.0f} | {med([g[1] for g in go]) / 1e6:.2f} M | "
          f"{med([h[0] for h in hf]):,.0f} | {med([h[1] for h in hf]) / 1e6:.3f} M | "
          f"{', '.join(f'{x:.1f}' for x in ratios)} | **{med(ratios):.1f}×** |")
