// Package spareproc keeps one P spare beside a server's event loops: it
// raises GOMAXPROCS to loops + 1 and, while the server runs, takes the spare
// back when the CPU is saturated and returns it when it is not. One server
// per process manages GOMAXPROCS at a time (it is the process's).
package spareproc

import (
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// The spare P.
//
// A gnet event loop waits in epoll_wait through an ordinary syscall, so it
// keeps its P while it sleeps there; only sysmon takes the P back, after one
// to two of its ticks, and sysmon's tick backs off to 10 ms when the process
// is quiet (golang/go#76290 asks for a syscall that hands the P off at once).
// With GOMAXPROCS equal to the number of loops, every P can sit in
// epoll_wait while a timer falls due (the embedded engine's step) or the
// netpoller has a reply from a remote engine: that work then waits for
// sysmon, up to 10-20 ms. Measured with GOMAXPROCS=1 and 1,000 streams at
// 20 ms ITL (bench/RESULTS.md): engine steps started 9-12 ms late at p90 and
// the server-added inter-token latency p99 was 13-23 ms; with one P more,
// 1 ms and 5-11 ms, at the same or less CPU per token.
//
// The spare P has a price when the cores are saturated: it lets Go run two
// threads where the loops would have run alone, and on one core they take
// turns, switching threads; full-load requests/s fell 20-45 %. So the spare
// is adaptive: Start raises GOMAXPROCS to loops + 1 (reserve), and
// control takes the spare back while the process uses more than
// saturatedUtil of the cores it was given, and returns it below
// relaxedUtil. GOMAXPROCS changes stop the world for a moment, so the
// controller looks once per controlPeriod and the two thresholds keep it
// from flapping. Setting GOMAXPROCS also ends the runtime's own updates of
// it from a changing cgroup CPU limit (Go 1.25+); KeepGOMAXPROCS keeps them.

// controlling is set while a server's controller runs: GOMAXPROCS is the
// process's, so a second server in the same process leaves it alone.
var controlling atomic.Bool

// Start raises GOMAXPROCS to loops+1 when it is lower and no other
// controller runs in the process, logs the change, and runs the controller
// on a goroutine of its own until stop is closed. It returns a channel
// closed once that controller has ended and released GOMAXPROCS to the
// next server, or nil when it changed nothing (GOMAXPROCS already high
// enough, or another server's controller runs). Safe for concurrent use.
//
// held is the Ps an engine's threads hold in long C calls
// (engine.ProcHolder): they are added to the reserve (loops + held + 1),
// and with any the spare stays whatever the load. Such an engine's compute
// threads are what saturates the CPU, not Go: taking the spare back then
// leaves every P held (the loops in epoll_wait, the engine in C), and each
// step's tokens wait for sysmon to be sent (at one stream on the 8x512
// model, inter-token p99 12-14 ms against 6-7 ms with the spare kept;
// bench/RESULTS.md).
func Start(log *zap.Logger, loops, held int, stop <-chan struct{}) (done <-chan struct{}) {
	if !controlling.CompareAndSwap(false, true) {
		return nil
	}
	from, to := reserve(loops + held)
	if to == from {
		controlling.Store(false)
		return nil
	}
	spare := "taken back while the CPU is saturated"
	if held > 0 {
		spare = "kept under load (the engine's compute makes it)"
	}
	log.Info("raised GOMAXPROCS so that a P stays free while every event loop waits in epoll_wait and the engine's threads are in C; the spare is "+spare+" (disable with KeepGOMAXPROCS / --keep-gomaxprocs)",
		zap.Int("from", from), zap.Int("to", to), zap.Int("event_loops", loops), zap.Int("engine_held", held))
	ch := make(chan struct{})
	go func() {
		if held > 0 {
			<-stop
		} else {
			control(log, from, to, stop)
		}
		controlling.Store(false)
		close(ch)
	}()
	return ch
}

// reserve raises GOMAXPROCS to loops+1 when it is lower and returns the
// value before and after.
func reserve(loops int) (from, to int) {
	from = runtime.GOMAXPROCS(0)
	if from >= loops+1 {
		return from, from
	}
	runtime.GOMAXPROCS(loops + 1)
	return from, loops + 1
}

const (
	controlPeriod = time.Second
	// saturatedUtil and relaxedUtil are fractions of the cores the process
	// was given (GOMAXPROCS before reserve).
	saturatedUtil = 0.90
	relaxedUtil   = 0.70
)

// spareWanted reports whether the spare P should be in place, given whether
// it is now and the CPU utilisation over the last period.
func spareWanted(spare bool, util float64) bool {
	if spare {
		return util < saturatedUtil
	}
	return util < relaxedUtil
}

// control adds and removes the spare P by load until stop is closed.
// without and with are GOMAXPROCS without and with the spare; without (the
// value before reserve) is also the cores the process was given, which
// utilisation is measured against.
func control(log *zap.Logger, without, with int, stop <-chan struct{}) {
	t := time.NewTicker(controlPeriod)
	defer t.Stop()
	spare := true
	lastCPU, lastWall := cpuTime(), time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		cpu, wall := cpuTime(), time.Now()
		util := (cpu - lastCPU).Seconds() / (wall.Sub(lastWall).Seconds() * float64(without))
		lastCPU, lastWall = cpu, wall
		if want := spareWanted(spare, util); want != spare {
			spare = want
			n := without
			if spare {
				n = with
			}
			runtime.GOMAXPROCS(n)
			log.Debug("spare P", zap.Bool("on", spare), zap.Int("gomaxprocs", n), zap.Float64("cpu_utilization", util))
		}
	}
}

// cpuTime is the CPU time (user + system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
