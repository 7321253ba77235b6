package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/vajra-go/vajra/bench"
)

// TestBenchAgainstFloor starts the floor server in-process and runs a short
// bounded benchmark against it: every stream must deliver exactly its
// tokens, without errors, streaming and not.
func TestBenchAgainstFloor(t *testing.T) {
	ctx := context.Background()
	addr, stop, err := Serve(ctx, Options{ITL: time.Millisecond, Loops: 2})
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
		cfg.ServerPID = os.Getpid() // the server runs in this process
		res, err := bench.Run(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests != 30 || res.Errors != 0 || res.TokensPerReq != 16 || res.UsageTokens != 30*16 {
			t.Fatalf("stream=%v: requests %d errors %d %v tokens/req %v usage %d", stream, res.Requests, res.Errors, res.ErrorSamples, res.TokensPerReq, res.UsageTokens)
		}
		if res.Server == nil || res.Server.CPUSeconds <= 0 || res.Server.CPUMicrosPerTok <= 0 || res.Server.PeakRSSBytes <= 0 {
			t.Fatalf("stream=%v: server stats %+v", stream, res.Server)
		}
		if stream && (res.Gap.Count != 30*15 || res.Gap.P50 < 0.5) {
			t.Fatalf("gaps: %+v", res.Gap)
		}
	}
}

// TestFloorWholeStreamAtOnce checks ITL 0 (saturation mode): the whole
// stream is written at once and keep-alive still works.
func TestFloorWholeStreamAtOnce(t *testing.T) {
	ctx := context.Background()
	addr, stop, err := Serve(ctx, Options{Loops: 1, Tokens: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	cfg := bench.DefaultConfig()
	cfg.URL = "http://" + addr
	cfg.Concurrency, cfg.Requests, cfg.Duration, cfg.Warmup, cfg.MaxTokens = 4, 40, 0, 0, 99
	res, err := bench.Run(ctx, cfg)
	if err != nil || res.Requests != 40 || res.Errors != 0 || res.TokensPerReq != 5 {
		t.Fatalf("err %v requests %d errors %d %v tokens/req %v", err, res.Requests, res.Errors, res.ErrorSamples, res.TokensPerReq)
	}
}

func TestHeadContentLength(t *testing.T) {
	f := func(head string, want int, ok bool) {
		t.Helper()
		n, gotOK := headContentLength([]byte(head))
		if n != want || gotOK != ok {
			t.Errorf("headContentLength(%q) = %d, %v; want %d, %v", head, n, gotOK, want, ok)
		}
	}
	f("POST / HTTP/1.1\r\nContent-Length: 12\r\n", 12, true)
	f("POST / HTTP/1.1\r\ncontent-length:7\r\n", 7, true)
	f("GET / HTTP/1.1\r\nHost: x\r\n", 0, true)
	f("POST / HTTP/1.1\r\nContent-Length: x\r\n", 0, false)
}
