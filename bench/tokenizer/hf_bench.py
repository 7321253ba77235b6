#!/usr/bin/env python3
"""Hugging Face tokenizers' single-string encode speed on engine/tokenizer's
8 KB prompts, to set beside BenchmarkEncode (bench/tokenizer/compare.sh runs
both, interleaved, pinned to one core).

    RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \
        python hf_bench.py TOKENIZERS_DIR PROMPTS_DIR [SECONDS]

Prints one line per tokenizer and prompt, in go test -bench's shape:
name, iterations, ns/op, MB/s, tokens/s.
"""
import os
import sys
import time

import tokenizers

src, prompts = sys.argv[1], sys.argv[2]
secs = float(sys.argv[3]) if len(sys.argv) > 3 else 2.0
for name in ["qwen3", "llama3", "gemma3"]:
    tok = tokenizers.Tokenizer.from_file(os.path.join(src, name, "package", "models", "tokenizer.json"))
    for kind in ["en", "mixed"]:
        with open(os.path.join(prompts, f"prompt-{kind}.txt"), encoding="utf-8", newline="") as f:
            p = f.read()
        n = len(tok.encode(p, add_special_tokens=False).ids)
        size = len(p.encode())
        for _ in range(3):  # warm the word cache as the Go benchmark does
            tok.encode(p, add_special_tokens=False)
        iters, start = 0, time.perf_counter()
        while True:
            tok.encode(p, add_special_tokens=False)
            iters += 1
            el = time.perf_counter() - start
            if el >= secs:
                break
        ns = el / iters * 1e9
        print(f"HF/{name}/{kind}\t{iters}\t{ns:.0f} ns/op\t{size / (ns / 1e9) / 1e6:.2f} MB/s\t{n * iters / el:.0f} tokens/s", flush=True)
