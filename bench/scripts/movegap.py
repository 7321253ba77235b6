#!/usr/bin/env python3
# movegap.py PORT: one greedy chat of 1,400 tokens that runs past a 1,024-token
# KV stream (SmolLM2's special tokens 0-2 banned, no ignore_eos), streamed;
# prints the gap p50 and the longest gap with its event index (bench/RESULTS.md,
# "Short KV streams and a long pool by default"). Stdlib only.
import http.client, json, sys, time
port = int(sys.argv[1])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
c.request("GET", "/v1/models"); m = json.loads(c.getresponse().read())["data"][0]["id"]
body = {"model": m, "temperature": 0, "max_tokens": 1400, "stream": True,
        "logit_bias": {"2": -100, "0": -100, "1": -100},
        "messages": [{"role": "user", "content": "Write a very long story about the sea."}]}
c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
r = c.getresponse()
times = []
t0 = time.monotonic()
for line in r:
    line = line.strip()
    if not line.startswith(b"data: ") or line == b"data: [DONE]":
        continue
    d = json.loads(line[6:])
    if d.get("choices") and d["choices"][0]["delta"].get("content"):
        times.append(time.monotonic())
gaps = [(times[i] - times[i-1]) * 1000 for i in range(1, len(times))]
gaps_sorted = sorted(gaps)
mx = max(gaps); at = gaps.index(mx) + 1
print(f"events {len(times)} ttft {(times[0]-t0)*1000:.0f} ms, gap p50 {gaps_sorted[len(gaps)//2]:.1f} ms, max {mx:.0f} ms at event {at}")
