// Package itl defines the inter-token latency histogram's bucket bounds
// once, for the engines that count gaps (engine.ITLBuckets, engine.Gaps)
// and the metrics that export them (vllm:inter_token_latency_seconds). It
// imports nothing of Vajra, so that metrics stays at the bottom.
package itl

import "time"

// Bounds are the upper bounds (inclusive, as Prometheus' le): those of
// vLLM's vllm:inter_token_latency_seconds histogram (10 ms to 80 s), below
// which Vajra adds 0.5, 1, 2.5 and 5 ms, because a front door measured in
// microseconds deserves them. Read-only.
var Bounds = [...]time.Duration{
	500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 75 * time.Millisecond,
	100 * time.Millisecond, 150 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond,
	400 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond, time.Second,
	2500 * time.Millisecond, 5 * time.Second, 7500 * time.Millisecond, 10 * time.Second,
	20 * time.Second, 40 * time.Second, 80 * time.Second,
}

// Seconds returns Bounds in seconds, as Prometheus takes them (a new
// slice each call).
func Seconds() []float64 {
	s := make([]float64, len(Bounds))
	for i, b := range Bounds {
		s[i] = b.Seconds()
	}
	return s
}
