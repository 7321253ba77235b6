package main

import (
	"context"
	"testing"
	"time"

	"github.com/vajra-go/vajra/bench"
)

// TestBenchAgainstBaseline starts the baseline server in-process and runs a
// short bounded benchmark against it.
func TestBenchAgainstBaseline(t *testing.T) {
	ctx := context.Background()
	addr, stop, err := Serve(ctx, Options{Host: "127.0.0.1", ITL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, stream := range []bool{true, false} {
		cfg := bench.DefaultConfig()
		cfg.URL = "http://" + addr
		cfg.Concurrency = 10
		cfg.Requests = 30
		cfg.Duration = 0
		cfg.Warmup = 0
		cfg.MaxTokens = 16
		cfg.Stream = stream
		cfg.ITL = time.Millisecond
		cfg.MaxTime = 20 * time.Second
		res, err := bench.Run(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests != 30 || res.Errors != 0 || res.TokensPerReq != 16 || res.UsageTokens != 30*16 {
			t.Fatalf("stream=%v: requests %d errors %d %v tokens/req %v usage %d", stream, res.Requests, res.Errors, res.ErrorSamples, res.TokensPerReq, res.UsageTokens)
		}
	}
}
