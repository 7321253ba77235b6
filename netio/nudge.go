package netio

import (
	"runtime"
	"time"
)

// Nudging the loops out of epoll_wait before sysmon takes their P.
//
// A gnet loop waits in epoll_wait through an ordinary syscall and keeps its
// P there (internal/spareproc). With a spare P idle beside the loops (the
// default), the runtime's sysmon takes a loop's P back only once the loop
// has sat in one epoll_wait for 10 ms; but every such retake resets sysmon's
// own tick to 20 µs, from which it backs off only after 50 quiet ticks. An
// engine that steps less often than every 10 ms (vLLM's engine core on the
// tiny model: about 18 ms; any remote engine under a real model) wakes each
// loop once per step, so every step costs a retake per loop and sysmon
// never leaves its fastest tick: some 3,500 sysmon wake-ups a second.
// Measured with the simulator at 18 ms between tokens, 8 streams, Vajra's
// process on one CPU (bench/RESULTS.md, "Slow engine steps and sysmon"):
// 143-171 µs of CPU per streamed token, most of it sysmon's, against
// 30-35 µs with the nudger.
//
// So while a loop has an exchange in flight and the spare P is there, the
// nudger rings the loop's doorbell once nudgeAfter has passed since the loop
// last answered it: the loop's epoll_wait then returns before sysmon's
// 10 ms, and sysmon backs off to its 10 ms tick. The nudger sleeps until the
// earliest loop falls due, so a loop whose engine steps wake it sooner than
// that is never nudged (the nudger then wakes once per step, finds the loop
// woken and sleeps again). Without a spare P (KeepGOMAXPROCS, or the
// controller took it back) it rings nothing: there the retake is what lets
// timers and the netpoller run (spareproc), and a loop kept out of the
// retake would delay them. With no exchange in flight anywhere the nudger
// waits on a channel and costs nothing.
const (
	nudgeAfter = 8 * time.Millisecond
	// nudgeSlack: a loop due within it is rung now rather than after one
	// more timer.
	nudgeSlack = 500 * time.Microsecond
	// nudgeNoSpare: how often the nudger looks again for the spare P while
	// it is taken back (the controller looks once a second).
	nudgeNoSpare = 100 * time.Millisecond
)

// epoch is the zero of monoNow.
var epoch = time.Now()

// monoNow is the monotonic clock of the loops' wake times, in nanoseconds.
func monoNow() int64 { return int64(time.Since(epoch)) }

// noteBusy is called when a loop's first exchange begins: it wakes the
// nudger if it waits. Safe for concurrent use; never blocks.
func (s *Server) noteBusy() {
	select {
	case s.nudgeWake <- struct{}{}:
	default:
	}
}

// nudger runs until the server stops (see above). reserve is the number of
// Ps below which no P is spare: the loops plus the Ps an engine's threads
// hold in C calls.
func (s *Server) nudger(reserve int) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	var loops []*loop
	for {
		if n := int(s.nloops.Load()); n != len(loops) {
			loops = loops[:0]
			s.loops.Range(func(_, v any) bool {
				loops = append(loops, v.(*loop))
				return true
			})
		}
		spare := runtime.GOMAXPROCS(0) > reserve
		now := monoNow()
		busy, next := false, time.Duration(nudgeAfter)
		for _, l := range loops {
			if l.busy.Load() == 0 {
				continue
			}
			busy = true
			if !spare {
				continue
			}
			age := time.Duration(now - l.lastWake.Load())
			if age >= nudgeAfter-nudgeSlack {
				s.nudges.Add(1)
				l.wake()
				age = 0
			}
			next = min(next, nudgeAfter-age)
		}
		if !busy {
			s.nudgeParked.Store(true)
			select {
			case <-s.stopped:
				return
			case <-s.nudgeWake:
			}
			s.nudgeParked.Store(false)
			continue
		}
		if !spare {
			next = nudgeNoSpare
		}
		t.Reset(next)
		select {
		case <-s.stopped:
			return
		case <-t.C:
		}
	}
}
