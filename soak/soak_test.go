package soak

import (
	"context"
	"flag"
	"testing"
	"time"
)

var (
	soakDuration = flag.Duration("soak.duration", 0, "measured load of TestSoak (default: DefaultConfig's 20s; `make soak`: 10m)")
	soakWarmup   = flag.Duration("soak.warmup", 0, "warm-up before the idle values are taken (default 3s)")
	soakWorkers  = flag.Int("soak.workers", 0, "concurrent clients (default 32)")
	soakProgress = flag.Duration("soak.progress", 0, "interval of the progress lines (default: none below 2m of load, else 1m)")
	soakSeed     = flag.Uint64("soak.seed", 1, "seed of the scenario mix")
)

// TestSoak is the bounded soak (package doc): the short form in
// `go test ./...`, the long one with -soak.duration. It fails on any run
// whose checks failed and on anything that did not return to idle.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak takes 20 s or more")
	}
	cfg := DefaultConfig()
	if *soakDuration > 0 {
		cfg.Duration = *soakDuration
	}
	if *soakWarmup > 0 {
		cfg.Warmup = *soakWarmup
	}
	if *soakWorkers > 0 {
		cfg.Workers = *soakWorkers
	}
	cfg.Progress = *soakProgress
	if cfg.Progress == 0 && cfg.Duration >= 2*time.Minute {
		cfg.Progress = time.Minute
	}
	cfg.Seed = *soakSeed
	// make test runs with -race: the detector's shadow memory grows with
	// the allocations and is never returned, so the RSS is only reported.
	cfg.SkipRSS = raceEnabled
	cfg.Logf = t.Logf
	if dl, ok := t.Deadline(); ok && time.Until(dl) < cfg.Warmup+cfg.Duration+2*cfg.IdleDeadline {
		t.Fatalf("the test deadline is too close for a %v soak: run with -timeout 0 or a larger -timeout", cfg.Duration)
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
	// A soak that did little proves little: every scenario must have run.
	for name, c := range rep.Runs {
		if c.OK == 0 {
			t.Errorf("scenario %s never passed", name)
		}
	}
}
