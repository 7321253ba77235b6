package netio

import (
	"context"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Waking the loops out of epoll_wait before sysmon takes their P.
//
// A gnet loop waits in epoll_wait through an ordinary syscall and keeps its
// P there (internal/spareproc). With a spare P idle beside the loops (the
// default), the runtime's sysmon takes a loop's P back only once the loop
// has sat in one epoll_wait for 10 ms; but every such retake resets sysmon's
// own tick to 20 µs, from which it backs off only after 50 quiet ticks. An
// engine that steps less often than every 10 ms (vLLM's engine core on its
// tiny test model: about 18 ms; any remote engine under a real model) wakes
// each loop once per step, so every step would cost a retake per loop and
// sysmon would never leave its fastest tick: some 3,500 sysmon wake-ups a
// second, 143-171 µs of CPU per streamed token with the simulator at 18 ms
// between tokens (bench/RESULTS.md, "Slow engine steps and sysmon").
//
// So each loop has a nudge timer: a timerfd in the loop's own epoll set,
// enrolled as a gnet connection of the loop (as the doorbell is). While the
// loop has an exchange in flight and the spare P is there, every wake of
// the loop (its doorbell, an exchange beginning, the timer itself) arms the
// timer nudgeAfter ahead, at most once per nudgeRearm; the loop's
// epoll_wait then returns before sysmon's 10 ms, and sysmon backs off to
// its 10 ms tick. The kernel's timer wakes the loop's own thread, nothing
// else: no goroutine ticks for it, no other thread wakes to ring a bell.
// A loop whose engine steps come sooner than nudgeAfter is never nudged.
// Without a spare P (KeepGOMAXPROCS, or the controller took it back) the
// timer is not armed: there the retake is what lets timers and the
// netpoller run (spareproc), and a loop kept out of the retake would delay
// them. With no exchange in flight the timer fires at most once more and
// stays disarmed.
//
// (It replaced a goroutine that rang each loop's doorbell 8 ms after its
// last wake: that cost a second thread's wake, the doorbell's write and,
// being late by a timer's slack, two nudges per 18 ms step instead of one:
// bench/RESULTS.md.)
const (
	// nudgeAfter is how long after its last wake a busy loop is woken:
	// under sysmon's 10 ms by more than a loaded machine's usual delay in
	// running the woken thread.
	nudgeAfter = 9 * time.Millisecond
	// nudgeRearm: a loop re-arms its timer at most this often, so a busy
	// loop (woken every few hundred microseconds by its streams) spends a
	// timerfd_settime(2) per millisecond at most; the timer then fires
	// between nudgeAfter-nudgeRearm and nudgeAfter after the last wake.
	nudgeRearm = time.Millisecond
	// spareRecheck: how often a loop reads GOMAXPROCS (under the
	// scheduler's lock) to learn whether the spare P is there; the
	// controller changes it at most once a second.
	spareRecheck = 100 * time.Millisecond
)

// reservedProcs is the number of Ps the running servers of the process
// hold: their loops, each in its epoll_wait, and the Ps their engines'
// threads hold in C calls. A P is spare when GOMAXPROCS is above it: two
// servers of one loop each in a process of two Ps have none, and nudged
// loops would then keep both Ps in epoll_wait out of sysmon's reach while
// goroutines wait for one (every token of a test's second server waited
// for the next nudge, 9 ms).
var reservedProcs atomic.Int32

// epoch is the zero of monoNow.
var epoch = time.Now()

// monoNow is the loops' monotonic clock, in nanoseconds.
func monoNow() int64 { return int64(time.Since(epoch)) }

// nudgeTimer is the gnet context of a loop's nudge timer connection.
type nudgeTimer struct {
	l  *loop
	fd int // the timerfd (gnet reads a dup of it)
}

// installNudgeTimer creates l's nudge timer and enrolls it in l. gnet
// enrolls only sockets (it takes a *net.UnixConn, *net.TCPConn or
// *net.UDPConn and dups its descriptor), so the timerfd is put in place of
// a socket pair's end under a UnixConn before gnet dups it: gnet then polls
// and reads the timerfd as a stream connection (each read drains the
// expiry count). It blocks until gnet enrolled it (which needs the loop to
// run), so it runs on its own goroutine. Without it the loop is not nudged
// (sysmon's retakes cost CPU, nothing else).
func (s *Server) installNudgeTimer(l *loop) {
	fail := func(what string, err error) { s.log.Warn("nudge timer: "+what, zap.Error(err)) }
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		fail("timerfd_create", err)
		return
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		_ = unix.Close(tfd)
		fail("socketpair", err)
		return
	}
	_ = unix.Close(fds[1])
	f := os.NewFile(uintptr(fds[0]), "vajra-nudge")
	nc, err := net.FileConn(f) // dups the fd
	_ = f.Close()
	if err != nil {
		_ = unix.Close(tfd)
		fail("conn", err)
		return
	}
	rc, err := nc.(*net.UnixConn).SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) { err = unix.Dup3(tfd, int(fd), unix.O_CLOEXEC) })
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		_ = nc.Close()
		_ = unix.Close(tfd)
		fail("dup3", err)
		return
	}
	t := &nudgeTimer{l: l, fd: tfd}
	ch, err := l.el.Enroll(gnet.NewContext(context.Background(), t), nc) // gnet dups, then closes nc
	if err == nil {
		if res := <-ch; res.Err != nil {
			err = res.Err
		}
	}
	if err != nil {
		_ = unix.Close(tfd)
		fail("enroll", err)
		return
	}
	s.bellMu.Lock()
	s.timers = append(s.timers, tfd)
	s.bellMu.Unlock()
}

// opened arms the loop's nudging once gnet opened the timer's connection.
// Loop-only.
func (t *nudgeTimer) opened() { t.l.timer = t.fd }

// fired answers the timer: it drains the expiry count and, while the loop
// is busy, arms it again. Loop-only.
func (t *nudgeTimer) fired(gc gnet.Conn) {
	_, _ = gc.Next(-1)
	t.l.srv.nudges.Add(1)
	t.l.armedAt = 0 // the timer is disarmed: arm it whatever the last arm's age
	t.l.keepAwake()
}

// closed stops the loop's nudging (the engine is stopping). Loop-only.
func (t *nudgeTimer) closed() { t.l.timer = -1 }

// keepAwake arms the loop's nudge timer nudgeAfter ahead when the loop has
// an exchange in flight and a P is spare, unless it was armed within
// nudgeRearm. Called at each wake of the loop. Loop-only.
func (l *loop) keepAwake() {
	if l.timer < 0 || l.busy.Load() == 0 {
		return
	}
	now := monoNow()
	if l.armedAt != 0 && now-l.armedAt < int64(nudgeRearm) {
		return
	}
	if now-l.spareAt >= int64(spareRecheck) || l.spareAt == 0 {
		l.spare, l.spareAt = runtime.GOMAXPROCS(0) > int(reservedProcs.Load()), now
	}
	if !l.spare {
		return
	}
	l.armedAt = now
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(nudgeAfter))}
	_ = unix.TimerfdSettime(l.timer, 0, &spec, nil)
}
