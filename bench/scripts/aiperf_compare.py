#!/usr/bin/env python3
"""Tabulate a bench/scripts/bench-aiperf.sh run: aiperf, vajra bench and the
raw SSE capture side by side per concurrency and round, and aiperf's figures
over vajra bench's from the same round.

    aiperf_compare.py OUT_DIR [CLK_TCK]

Columns, each under its tool's own definition (bench/RESULTS.md explains
them): tok/s as the tool reports it (aiperf: its tokenizer's count of the
output text over first request to last response; vajra bench: content
events arriving in its window; capture: usage over first start to last
content event) and by the server's usage.completion_tokens; tokens per
request as counted; TTFT p50/p99; the tool's headline ITL p50/p99
(aiperf: one mean per request, (latency - TTFT) / (OSL - 1); vajra bench
and the capture: the gap between consecutive content events, every one);
the per-event gap (aiperf's inter_chunk_latency); request latency p50/p99;
the share of per-event gaps under 1 ms (two events in one read);
the tool's own CPU seconds (user + system, whole process tree and run;
aiperf's also in cores over its profiling window, from tree_cpu.txt) and
the server's over the run. Under each tool's row, when the run saved them,
the server's own histograms over that run (vllm:time_to_first_token,
inter_token_latency: one value per engine step that gave the request
output, e2e_request_latency; percentiles interpolated within their coarse
buckets, means exact), warm-up requests included.
"""
import glob
import json
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def aiperf_row(d):
    j = load(os.path.join(d, "profile_export_aiperf.json"))
    g = lambda k, s="avg": (j.get(k) or {}).get(s)  # noqa: E731
    n = g("request_count")
    usage, osl = g("total_usage_completion_tokens"), g("total_osl")
    tps = g("output_token_throughput")
    return {
        # aiperf's own window (its output_token_throughput's), by usage.
        "req": n, "tok_s": tps,
        "tok_s_usage": tps * usage / osl if tps and usage and osl else None,
        "tok_req": g("output_sequence_length"), "usage_req": g("usage_completion_tokens"),
        "ttft50": g("time_to_first_token", "p50"), "ttft99": g("time_to_first_token", "p99"),
        "itl50": g("inter_token_latency", "p50"), "itl99": g("inter_token_latency", "p99"),
        "gap50": g("inter_chunk_latency", "p50"), "gap99": g("inter_chunk_latency", "p99"),
        "e2e50": g("request_latency", "p50"), "e2e99": g("request_latency", "p99"),
        "errors": (j.get("error_summary") or []) and len(j["error_summary"]),
        "zero": aiperf_zero_gaps(os.path.join(d, "profile_export.jsonl")),
        "cores": aiperf_window_cores(d, j),
    }


def aiperf_window_cores(d, j):
    """aiperf's CPU (cores) over its profiling window, from tree_cpu.txt."""
    import datetime
    try:
        rows = [tuple(map(float, l.split())) for l in open(os.path.join(d, "tree_cpu.txt")) if l.strip()]
        t0, t1 = (datetime.datetime.fromisoformat(j[k]).replace(tzinfo=datetime.timezone.utc).timestamp()
                  for k in ("start_time", "end_time"))
    except (OSError, KeyError, ValueError, TypeError):
        return None
    inside = [(t, c) for t, c in rows if t0 <= t <= t1]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def aiperf_zero_gaps(path):
    """The share of aiperf's per-chunk gaps under 1 ms (events read together)."""
    n = z = 0
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if (rec.get("metadata") or {}).get("benchmark_phase") != "profiling":
                continue
            for g in ((rec.get("metrics") or {}).get("inter_chunk_latency") or {}).get("value") or []:
                n += 1
                z += g < 1.0
    return z / n if n else None


def vajra_row(d):
    j = load(os.path.join(d, "vajra.json"))
    req = j["requests"]
    return {
        "req": req, "tok_s": j["tokens_per_s"],
        # usage_tokens_per_s as vajra bench computes it since 35b9937's
        # successor: the window's events times usage tokens per event.
        "tok_s_usage": (j["tokens_per_s"] * j["usage_tokens"] / (j["tokens_per_request"] * req)
                        if req and j["tokens_per_request"] and j["usage_tokens"] else None),
        "tok_req": j["tokens_per_request"], "usage_req": j["usage_tokens"] / req if req else None,
        "ttft50": j["ttft"]["p50_ms"], "ttft99": j["ttft"]["p99_ms"],
        "itl50": j["inter_token_gap"]["p50_ms"], "itl99": j["inter_token_gap"]["p99_ms"],
        "gap50": j["inter_token_gap"]["p50_ms"], "gap99": j["inter_token_gap"]["p99_ms"],
        "e2e50": j["end_to_end"]["p50_ms"], "e2e99": j["end_to_end"]["p99_ms"],
        "errors": j["errors"],
        "zero": (sum(b["count"] for b in j["gap_histogram"] if b["hi_ns"] <= 1_000_000) / j["inter_token_gap"]["count"]
                 if j["inter_token_gap"]["count"] else None),
    }


def raw_row(d):
    j = load(os.path.join(d, "capture.json"))
    req = j["requests"]
    return {
        "req": req, "tok_s": j["tokens_per_s_events"], "tok_s_usage": j["tokens_per_s_usage"],
        "tok_req": j["content_events"] / req, "usage_req": j["usage_tokens"] / req,
        "ttft50": j["ttft_ms"]["p50"], "ttft99": j["ttft_ms"]["p99"],
        "itl50": j["gap_ms"]["p50"], "itl99": j["gap_ms"]["p99"],
        "gap50": j["gap_ms"]["p50"], "gap99": j["gap_ms"]["p99"],
        "e2e50": j["e2e_done_ms"]["p50"], "e2e99": j["e2e_done_ms"]["p99"],
        "errors": j["errors"],
        "itl_req50": j["itl_per_request_ms"]["p50"], "itl_req99": j["itl_per_request_ms"]["p99"],
        "zero": raw_zero_gaps(os.path.join(d, "events.jsonl")),
    }


def raw_zero_gaps(path):
    n = z = 0
    with open(path) as f:
        for line in f:
            ts = [t for t, c, _ in json.loads(line)["events"] if c]
            for a, b in zip(ts, ts[1:]):
                n += 1
                z += b - a < 1_000_000
    return z / n if n else None


def prom(path):
    """The vllm: series of a /metrics text: {name: value}, {name: [(le, count)]}."""
    vals, hist = {}, {}
    with open(path) as f:
        for line in f:
            if not line.startswith("vllm:"):
                continue
            key, _, v = line.rpartition(" ")
            name = key.split("{", 1)[0]
            if name.endswith("_bucket"):
                le = key.split('le="', 1)[1].split('"', 1)[0]
                hist.setdefault(name[:-7], []).append((float(le), float(v)))
            elif 'finished_reason="' in key:
                vals[name] = vals.get(name, 0) + float(v)
            else:
                vals[name] = float(v)
    return vals, hist


def hist_pct(buckets, p):
    """Percentile p of a cumulative histogram, linear within its bucket (s)."""
    total = buckets[-1][1]
    if total <= 0:
        return None
    want, lo, below = p / 100 * total, 0.0, 0.0
    for le, cum in buckets:
        if cum >= want:
            if le == float("inf"):
                return lo
            return lo + (le - lo) * (want - below) / (cum - below) if cum > below else le
        lo, below = le, cum
    return lo


def server_row(d):
    """The server's own view of one run: the delta of its /metrics."""
    (v0, h0), (v1, h1) = prom(os.path.join(d, "metrics.before")), prom(os.path.join(d, "metrics.after"))
    dv = lambda k: v1.get(k, 0) - v0.get(k, 0)  # noqa: E731

    def dh(name):
        a = dict(h0.get(name, []))
        return [(le, c - a.get(le, 0)) for le, c in h1.get(name, [])]

    row = {"req": dv("vllm:request_success_total")}
    row["usage_req"] = dv("vllm:generation_tokens_total") / row["req"] if row["req"] else None
    for key, name in [("ttft", "vllm:time_to_first_token_seconds"), ("itl", "vllm:inter_token_latency_seconds"),
                      ("e2e", "vllm:e2e_request_latency_seconds")]:
        b = dh(name)
        for q in (50, 99):
            x = hist_pct(b, q) if b else None
            row[f"{key}{q}"] = x * 1e3 if x is not None else None
        n = dv(name + "_count")
        row[key + "_mean"] = dv(name + "_sum") / n * 1e3 if n else None
    row["gap50"], row["gap99"] = row["itl50"], row["itl99"]
    return row


COLS = [("tok_s", "tok/s", 1), ("tok_s_usage", "tok/s usage", 1), ("tok_req", "tok/req", 1),
        ("usage_req", "usage/req", 1), ("ttft50", "TTFT p50", 1), ("ttft99", "TTFT p99", 1),
        ("itl50", "ITL p50", 1), ("itl99", "ITL p99", 1), ("gap50", "gap p50", 1), ("gap99", "gap p99", 1),
        ("e2e50", "latency p50", 0), ("e2e99", "latency p99", 0), ("zero", "gaps <1 ms", 3)]


def fmt(v, digits):
    if v is None:
        return "n/a"
    return f"{v:.{digits}f}"


def main():
    out = sys.argv[1]
    tck = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    runs = {}
    for d in sorted(glob.glob(os.path.join(out, "r*-c*-*"))):
        r, c, tool = os.path.basename(d).split("-", 2)
        row = None
        try:
            row = {"aiperf": aiperf_row, "vajra": vajra_row, "raw": raw_row}[tool](d)
        except (OSError, KeyError, ValueError, ZeroDivisionError) as e:
            row = {"failed": f"{type(e).__name__}: {e}"}
        try:
            u, s, _wall = open(os.path.join(d, "time")).read().split()[-3:]
            row["cpu"] = float(u) + float(s)
        except (OSError, ValueError):
            row["cpu"] = None
        try:
            row["srv_cpu"] = int(open(os.path.join(d, "server_ticks")).read()) / tck
            row["load"] = open(os.path.join(d, "loadavg")).read().split()[0]
        except (OSError, ValueError):
            row["srv_cpu"], row["load"] = None, "?"
        runs.setdefault(int(c[1:]), {}).setdefault(int(r[1:]), {})[tool] = row
        if os.path.exists(os.path.join(d, "metrics.after")):
            try:
                row["server"] = server_row(d)
            except (OSError, ValueError, IndexError) as e:
                row["server"] = {"failed": str(e)}
    head = "| c | round | tool | req | " + " | ".join(h for _, h, _ in COLS) + " | tool cpu s | server cpu s | load |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for c in sorted(runs):
        for r in sorted(runs[c]):
            rr = runs[c][r]
            for tool in ("aiperf", "vajra", "raw"):
                row = rr.get(tool)
                if not row:
                    continue
                if "failed" in row:
                    print(f"| {c} | {r} | {tool} | failed: {row['failed']} |")
                    continue
                name = {"vajra": "vajra bench", "raw": "capture"}.get(tool, tool)
                print(f"| {c} | {r} | {name} | {row['req']:.0f} | "
                      + " | ".join(fmt(row.get(k), dg) for k, _, dg in COLS)
                      + f" | {fmt(row['cpu'], 2)}"
                      + (f" ({row['cores']:.2f} cores in its window)" if row.get("cores") is not None else "")
                      + f" | {fmt(row['srv_cpu'], 1)} | {row['load']} |")
                sv = row.get("server")
                if sv and "failed" not in sv:
                    print(f"| {c} | {r} | server /metrics, {name} run | {sv['req']:.0f} | "
                          + " | ".join(fmt(sv.get(k), dg) for k, _, dg in COLS)
                          + f" | means: TTFT {fmt(sv['ttft_mean'], 1)}, ITL {fmt(sv['itl_mean'], 1)}, latency {fmt(sv['e2e_mean'], 0)} | | |")
            a, v = rr.get("aiperf"), rr.get("vajra")
            if a and v and "failed" not in a and "failed" not in v:
                ratio = lambda k: a[k] / v[k] if a.get(k) and v.get(k) else None  # noqa: E731
                print(f"| {c} | {r} | aiperf/vajra | | "
                      + " | ".join(fmt(ratio(k), 2) for k, _, _ in COLS) + " | | | |")
            raw = rr.get("raw")
            if raw and "itl_req50" in raw:
                print(f"| {c} | {r} | capture, ITL per request | | | | | | | | "
                      f"{fmt(raw['itl_req50'], 1)} | {fmt(raw['itl_req99'], 1)} | | | | | | | | | |")


if __name__ == "__main__":
    main()
