#!/usr/bin/env python3
"""The referee of bench/scripts/bench-aiperf.sh: a small closed-loop client
that times every SSE event of streaming chat completions and writes them
raw, so that the load tools' figures can be recomputed under each
definition.

    sse_capture.py URL MODEL -c 8 -n 48 --prompt-tokens 128 --max-tokens 64 \
        [--tokenizer DIR] [--prompt-file F] [--out raw.jsonl] [--max-time 300]

One thread per stream, one keep-alive connection each (http.client), -n
requests in all, bounded by --max-time. Per request it records the
monotonic ns of every read that carried an SSE event (the time an instrument
could have seen it), each event's delta content, the usage block, and
prints the figures under both definitions in use:

* per event ("gap", vajra bench; aiperf's inter_chunk_latency): the time
  between consecutive events with non-empty content, over all requests;
* per request ("ITL", aiperf's inter_token_latency): (last content event -
  first) / (output tokens - 1), one value per request;
* output tokens three ways: events with content (vajra bench), the
  server's usage.completion_tokens, and the tokenizer's count of the joined
  text (aiperf without --use-server-token-count).

The prompt is vajra bench's (BuildPrompt: the same cycled words) unless
--prompt-file gives one. Loopback only.
"""
import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse

# bench/dialect.go promptWords, in the same order.
PROMPT_WORDS = """time person year way day thing man world life hand part child eye
woman place work week case point number group problem fact home water room mother area money story
month lot right study book job word side kind head house friend hour game line end member law car city
name team minute idea kid body back parent face others level office door health art war history party""".split()


def build_prompt(n):
    return " ".join(PROMPT_WORDS[i % len(PROMPT_WORDS)] for i in range(n))


def pct(xs, p):
    """The nearest-rank percentile p (0-100) of xs."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(p / 100 * len(s) + 0.5)) - 1))
    return s[k]


def one_request(conn, path, body, deadline):
    events = []  # (ns, content or None, usage or None)
    start = time.perf_counter_ns()
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    head = time.perf_counter_ns()
    if resp.status != 200:
        raise RuntimeError(f"status {resp.status}: {resp.read()[:300]!r}")
    buf = b""
    done_ns = None
    while done_ns is None:
        if time.monotonic() > deadline:
            raise TimeoutError("--max-time reached inside a request")
        chunk = resp.read1(65536)
        now = time.perf_counter_ns()
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            data = b"".join(l[5:].lstrip() for l in ev.split(b"\n") if l.startswith(b"data:"))
            if not data:
                continue
            if data == b"[DONE]":
                done_ns = now
                break
            obj = json.loads(data)
            content = None
            ch = obj.get("choices") or []
            if ch:
                content = (ch[0].get("delta") or {}).get("content")
            events.append((now, content, obj.get("usage")))
    resp.read()  # the rest of the chunked body, keeping the connection usable
    return {"start": start, "head": head, "done": done_ns,
            "events": [(t - start, c, u) for t, c, u in events]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url")
    ap.add_argument("model")
    ap.add_argument("-c", type=int, default=1, help="concurrent streams")
    ap.add_argument("-n", type=int, default=16, help="requests in all")
    ap.add_argument("--warmup", type=int, default=0, help="requests first run and not counted (per stream)")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--prompt-file")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--tokenizer", help="Hugging Face tokenizer folder (tokenizer.json) to count the output text")
    ap.add_argument("--max-time", type=float, default=300)
    ap.add_argument("--out", help="write every request's events (ns since its start, content, usage) as JSON lines")
    ap.add_argument("--json", help="write the summary as JSON")
    a = ap.parse_args()

    u = urllib.parse.urlparse(a.url)
    if u.hostname not in ("127.0.0.1", "localhost", "::1") and not (u.hostname or "").startswith("127."):
        sys.exit("sse_capture: loopback only")
    prompt = open(a.prompt_file).read() if a.prompt_file else build_prompt(a.prompt_tokens)
    body = json.dumps({"model": a.model, "messages": [{"role": "user", "content": prompt}],
                       "max_tokens": a.max_tokens, "stream": True, "ignore_eos": True,
                       "stream_options": {"include_usage": True}}).encode()
    path = (u.path.rstrip("/") or "") + "/v1/chat/completions"
    deadline = time.monotonic() + a.max_time
    lock = threading.Lock()
    left = [a.n]
    results, errors = [], []
    t0 = [None]

    def stream():
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=a.max_time)
        try:
            for _ in range(a.warmup):
                one_request(conn, path, body, deadline)
            with lock:
                if t0[0] is None:
                    t0[0] = time.perf_counter_ns()
            while time.monotonic() < deadline:
                with lock:
                    if left[0] == 0:
                        return
                    left[0] -= 1
                try:
                    r = one_request(conn, path, body, deadline)
                except Exception as e:  # noqa: BLE001 (reported, counted)
                    with lock:
                        errors.append(repr(e))
                    conn.close()
                    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=a.max_time)
                    continue
                with lock:
                    results.append(r)
        finally:
            conn.close()

    threads = [threading.Thread(target=stream) for _ in range(a.c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if not results:
        sys.exit(f"sse_capture: no request succeeded: {errors[:3]}")

    tok = None
    if a.tokenizer:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(os.path.join(a.tokenizer, "tokenizer.json"))

    ttft, gaps, itl, e2e_last, e2e_done = [], [], [], [], []
    n_events, n_usage, n_tok, multi = 0, 0, 0, 0
    first_start = min(r["start"] for r in results)
    last_end = max(r["start"] + [t for t, c, _ in r["events"] if c][-1] for r in results)
    for r in results:
        content = [(t, c) for t, c, _ in r["events"] if c]
        usage = next((u["completion_tokens"] for _, _, u in r["events"] if u), None)
        n_events += len(content)
        n_usage += usage or 0
        if tok:
            n_tok += len(tok.encode("".join(c for _, c in content), add_special_tokens=False).ids)
        ttft.append(content[0][0])
        gaps += [b[0] - a_[0] for a_, b in zip(content, content[1:])]
        if usage and usage > 1:
            itl.append((content[-1][0] - content[0][0]) / (usage - 1))
        e2e_last.append(content[-1][0])
        if r["done"]:
            e2e_done.append(r["done"] - r["start"])
        if usage and usage != len(content):
            multi += 1
    window = (last_end - first_start) / 1e9
    ms = lambda v: v / 1e6  # noqa: E731
    summary = {
        "requests": len(results), "errors": len(errors), "error_samples": errors[:3],
        "window_s": window,
        "content_events": n_events, "usage_tokens": n_usage, "tokenizer_tokens": n_tok if tok else None,
        "requests_where_events_differ_from_usage": multi,
        "tokens_per_s_usage": n_usage / window, "tokens_per_s_events": n_events / window,
        "ttft_ms": {"p50": ms(pct(ttft, 50)), "p99": ms(pct(ttft, 99))},
        "gap_ms": {"count": len(gaps), "p50": ms(pct(gaps, 50)), "p99": ms(pct(gaps, 99))},
        "itl_per_request_ms": {"count": len(itl), "p50": ms(pct(itl, 50)), "p99": ms(pct(itl, 99))},
        "e2e_last_content_ms": {"p50": ms(pct(e2e_last, 50)), "p99": ms(pct(e2e_last, 99))},
        "e2e_done_ms": {"p50": ms(pct(e2e_done, 50)), "p99": ms(pct(e2e_done, 99))},
    }
    if a.out:
        with open(a.out, "w") as f:
            for r in results:
                f.write(json.dumps({"start_ns": r["start"], "done_ns": r["done"] and r["done"] - r["start"],
                                    "events": r["events"]}) + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=2)
    json.dump(summary, sys.stdout, indent=2)
    print()
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
