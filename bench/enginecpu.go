package bench

import "context"

// The front door's own CPU. An engine that computes the model in the server's
// process (the llama engine) exports the CPU time it spent doing so as
// vajra_engine_compute_cpu_seconds_total on /metrics. With -engine-cpu the
// counter is read at the window's two ends, around the reading of the
// process's CPU (/proc), so that
//
//	front door = process CPU − engine compute CPU
//
// is the server's cost outside the model: HTTP, sessions, scheduling,
// tokenizing, detokenizing and framing. The engine publishes the counter
// once per engine step, so each end of the window may miss up to one step's
// compute: over a window of many steps that is a small error, and the
// report says how many seconds the engine computed so that it can be
// judged.

const engineCPUMetric = "vajra_engine_compute_cpu_seconds_total"

// engineCPUWatch reads a server's engine compute counter.
type engineCPUWatch struct {
	url string // .../metrics; empty: off
	at  [2]float64
	ok  [2]bool
}

// check scrapes once, so that a server without the counter is refused
// before load starts.
func (e *engineCPUWatch) check(ctx context.Context) error {
	if e.url == "" {
		return nil
	}
	_, err := scrapeMetric(ctx, e.url, engineCPUMetric)
	return err
}

func (e *engineCPUWatch) mark(ctx context.Context, i int) {
	if e.url == "" {
		return
	}
	v, err := scrapeMetric(ctx, e.url, engineCPUMetric)
	e.at[i], e.ok[i] = v, err == nil
}

// seconds returns the engine's compute CPU in the window; ok is false when
// it was not measured.
func (e *engineCPUWatch) seconds() (s float64, ok bool) {
	if e.url == "" || !e.ok[0] || !e.ok[1] {
		return 0, false
	}
	return max(0, e.at[1]-e.at[0]), true
}

// frontDoor fills st's engine and front-door figures from the engine's
// compute CPU in the window, st.CPUSeconds and the tokens delivered.
func (st *ProcStats) frontDoor(engine float64, tokens int64) {
	st.engineCPU = true
	st.EngineCPUSeconds = engine
	st.FrontDoorCPUSeconds = st.CPUSeconds - engine
	st.FrontDoorMicrosPerTok, st.FrontDoorShare = -1, -1
	if tokens > 0 {
		st.FrontDoorMicrosPerTok = st.FrontDoorCPUSeconds * 1e6 / float64(tokens)
	}
	if engine > 0 {
		st.FrontDoorShare = st.FrontDoorCPUSeconds / engine
	}
}
