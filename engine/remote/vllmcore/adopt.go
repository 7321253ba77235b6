package vllmcore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vajra-go/vajra/engine/remote/vllmcore/v032"
	"github.com/vajra-go/vajra/engine/remote/vllmcore/zmtp"
)

// Adopt is the front end of engines whose handshake another process ran:
// `vllm serve` with VLLM_USE_RUST_FRONTEND=1 binds the engines' request
// address (a ROUTER) and output address (a PULL) itself, starts the
// engines and runs their handshake, and hands the two listening sockets to
// the front end it starts (`vajra frontend --input-listener-fd N
// --output-listener-fd N`), as vLLM's AsyncMPClient and vllm-rs take them
// over. Adopt accepts on input and output until each engine of ranks
// start..start+count-1 has connected its DEALER and its PUSH and sent its
// registration on the DEALER, then closes both listeners (no engine
// attaches later: vLLM's launcher restarts no engine) and returns the
// Frontend with the engines attached. It fails when timeout passes first
// (vLLM's VLLM_ENGINE_READY_TIMEOUT_S), or when an engine of another vLLM
// release registers (ErrVersion).
//
// A PULL's peer sends no identity, so each output connection is paired
// with its engine's request connection by the peer: the process (its pid,
// over ipc://, where both sockets of an engine are opened by one process)
// or the host (over tcp://, which then allows one engine per host).
//
// Adopt owns input and output from the call on and closes them on return.
// Cancelling ctx ends the wait with ctx's error.
func Adopt(ctx context.Context, input, output net.Listener, start, count int, timeout time.Duration, o Options) (*Frontend, error) {
	defer input.Close()
	defer output.Close()
	if count < 1 || start < 0 || start+count > 1<<16 {
		return nil, fmt.Errorf("%w: engines %d..%d: want 1 or more, with ranks that fit in 2 bytes", ErrHandshake, start, start+count-1)
	}
	f := &Frontend{opts: o, ln: input, engines: map[int]*Engine{}}
	f.attach = sync.NewCond(&f.mu)
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	deadline := time.Now().Add(timeout)
	type registered struct {
		rank  int
		ready *v032.ReadyResponse
		c     *zmtp.Conn
		peer  string
	}
	type pulled struct {
		c    *zmtp.Conn
		peer string
	}
	regs := make(chan registered)
	outs := make(chan pulled)
	errs := make(chan error)
	stop := make(chan struct{}) // closed when Adopt takes nothing more
	report := func(err error) {
		select {
		case errs <- err:
		case <-stop:
		}
	}
	// Each accepted connection is set up on its own goroutine, so that a
	// stranger who connects and says nothing holds up nobody.
	go acceptEach(input, func(nc net.Conn) {
		c, err := zmtp.Server(nc, "ROUTER", 10*time.Second)
		if err != nil {
			nc.Close()
			report(fmt.Errorf("%w: a request connection: %v", ErrHandshake, err))
			return
		}
		if len(c.Identity) != 2 {
			c.Close()
			report(fmt.Errorf("%w: engine identity of %d bytes (want its rank as 2 bytes)", ErrHandshake, len(c.Identity)))
			return
		}
		rank := int(binary.LittleEndian.Uint16(c.Identity))
		if rank < start || rank >= start+count {
			c.Close()
			report(fmt.Errorf("%w: engine %d registered, this front end serves engines %d..%d", ErrHandshake, rank, start, start+count-1))
			return
		}
		nc.SetReadDeadline(deadline)
		frames, err := c.ReadMsg()
		if err != nil {
			c.Close()
			report(fmt.Errorf("%w: engine %d's registration: %v", ErrHandshake, rank, err))
			return
		}
		ready, err := v032.DecodeReady(frames[len(frames)-1])
		if err != nil {
			c.Close()
			report(fmt.Errorf("%w: engine %d's registration: %v", ErrHandshake, rank, err))
			return
		}
		if !v032.Compatible(ready.VLLMVersion) {
			c.Close()
			report(fmt.Errorf("%w: engine %d runs vLLM %s, this Vajra speaks vLLM %s.x's engine protocol: run the engine with vllm %s.x, or a Vajra built for vLLM %s",
				ErrVersion, rank, ready.VLLMVersion, v032.Version, v032.Version, ready.VLLMVersion))
			return
		}
		nc.SetReadDeadline(time.Time{})
		select {
		case regs <- registered{rank, ready, c, peerOf(nc)}:
		case <-stop:
			c.Close()
		}
	})
	go acceptEach(output, func(nc net.Conn) {
		c, err := zmtp.Server(nc, "PULL", 10*time.Second)
		if err != nil {
			nc.Close()
			report(fmt.Errorf("%w: an output connection: %v", ErrHandshake, err))
			return
		}
		select {
		case outs <- pulled{c, peerOf(nc)}:
		case <-stop:
			c.Close()
		}
	})

	byRank := map[int]registered{}
	var pulls []pulled
	var err error
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for err == nil && (len(byRank) < count || len(pulls) < count) {
		select {
		case r := <-regs:
			if old, dup := byRank[r.rank]; dup {
				old.c.Close()
			}
			byRank[r.rank] = r
		case p := <-outs:
			if len(pulls) == count {
				p.c.Close()
				err = fmt.Errorf("%w: more output connections than the %d engines", ErrHandshake, count)
				break
			}
			pulls = append(pulls, p)
		case e := <-errs:
			if errors.Is(e, ErrVersion) {
				err = e
			} else if o.OnError != nil {
				o.OnError(e)
			}
		case <-ctx.Done():
			err = fmt.Errorf("%w: waiting for the engines: %w", ErrHandshake, ctx.Err())
		case <-timer.C:
			err = fmt.Errorf("%w: %d of %d engines registered and %d of their output connections came within %v (VLLM_ENGINE_READY_TIMEOUT_S)",
				ErrHandshake, len(byRank), count, len(pulls), timeout)
		}
	}
	close(stop)
	input.Close()
	output.Close()
	var pairs map[int]*zmtp.Conn
	if err == nil {
		pairs, err = pairOutputs(byRank, pulls, func(r registered) string { return r.peer }, func(p pulled) (string, *zmtp.Conn) { return p.peer, p.c })
	}
	if err != nil {
		for _, r := range byRank {
			r.c.Close()
		}
		for _, p := range pulls {
			p.c.Close()
		}
		return nil, err
	}
	for rank, r := range byRank {
		e := newEngine(f, rank, r.ready, r.c, pairs[rank])
		f.engines[rank] = e
	}
	for _, e := range f.engines {
		e.start()
		if o.OnAttach != nil {
			o.OnAttach(e)
		}
	}
	return f, nil
}

// acceptEach accepts until ln closes, running setup on a goroutine of its
// own per connection.
func acceptEach(ln net.Listener, setup func(net.Conn)) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		go setup(nc)
	}
}

// pairOutputs gives each registered engine its output connection: the
// only one when there is one engine, else the one from the same peer.
func pairOutputs[R any, P any](regs map[int]R, pulls []P, regPeer func(R) string, pull func(P) (string, *zmtp.Conn)) (map[int]*zmtp.Conn, error) {
	out := make(map[int]*zmtp.Conn, len(regs))
	if len(regs) == 1 && len(pulls) == 1 {
		for rank := range regs {
			_, out[rank] = pull(pulls[0])
		}
		return out, nil
	}
	byPeer := map[string]int{}
	for rank, r := range regs {
		p := regPeer(r)
		if other, dup := byPeer[p]; dup || p == "" {
			return nil, fmt.Errorf("%w: engines %d and %d connect from one peer (%s): their output connections cannot be told apart (run one engine per host over tcp://)", ErrHandshake, other, rank, p)
		}
		byPeer[p] = rank
	}
	for _, pl := range pulls {
		p, c := pull(pl)
		rank, ok := byPeer[p]
		if !ok {
			return nil, fmt.Errorf("%w: an output connection from %s, which registered no engine", ErrHandshake, p)
		}
		if _, dup := out[rank]; dup {
			return nil, fmt.Errorf("%w: two output connections from engine %d's peer %s", ErrHandshake, rank, p)
		}
		out[rank] = c
	}
	return out, nil
}

// peerOf names the process at the other end of a Unix socket ("pid N"),
// or the host of a TCP peer ("host H"); "" when unknown.
func peerOf(nc net.Conn) string {
	switch c := nc.(type) {
	case *net.UnixConn:
		rc, err := c.SyscallConn()
		if err != nil {
			return ""
		}
		var cred *unix.Ucred
		var cerr error
		if err := rc.Control(func(fd uintptr) {
			cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		}); err != nil || cerr != nil {
			return ""
		}
		return "pid " + strconv.Itoa(int(cred.Pid))
	case *net.TCPConn:
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			return "host " + a.IP.String()
		}
	}
	return ""
}
