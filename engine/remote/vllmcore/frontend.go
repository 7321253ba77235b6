// Package vllmcore is Vajra as the front end of vLLM's engine core: it
// speaks the engine core's own protocol (ZeroMQ sockets, msgpack
// messages), with no Python process between Vajra and the engine.
//
// A Frontend binds the handshake address; engines started with `vllm serve
// MODEL --headless --data-parallel-address HOST --data-parallel-rpc-port
// PORT ...` connect to it, and each engine rank that completes the
// handshake becomes an *Engine, a remote.Client. The sockets are Vajra's
// own ZMTP (package zmtp): per engine one request connection (Vajra's
// ROUTER, the engine's DEALER) and one output connection (Vajra's PULL,
// the engine's PUSH), over ipc:// when the engine runs on this host and
// tcp:// otherwise. The message layouts are those of one vLLM release line
// (package v032); an engine of another release is refused with an error
// that names both versions.
//
// The engine stops only on EOS, stop token ids, length and repetition:
// stop strings, detokenization and n > 1 (sub-requests sharing the
// prompt, named as vLLM's front end names them) are the front end's work.
package vllmcore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/vajra-go/vajra/engine/remote/vllmcore/v032"
	"github.com/vajra-go/vajra/engine/remote/vllmcore/zmtp"
)

var (
	// ErrVersion reports an engine of a vLLM release this front end does
	// not speak.
	ErrVersion = errors.New("vllmcore: engine version mismatch")
	// ErrHandshake reports an engine that broke the start-up handshake.
	ErrHandshake = errors.New("vllmcore: handshake failed")
	// ErrEngineDead reports an engine that failed (ENGINE_CORE_DEAD) or
	// whose connection is gone.
	ErrEngineDead = errors.New("vllmcore: engine is gone")
	// ErrClosed reports a call on a closed Frontend or Engine.
	ErrClosed = errors.New("vllmcore: closed")
)

// Options configure a Frontend.
type Options struct {
	// ServedModelName and ModelPath are what Info reports.
	ServedModelName string
	ModelPath       string
	// DataParallelSize is the deployment's data-parallel size when the
	// launcher says it (vllm serve's --data-parallel-size, given to
	// `vajra frontend`); 0: not known (see Engine.Ranks).
	DataParallelSize int
	// StartTimeout bounds an engine's start-up after its HELLO (model
	// loading included); 0: 10 minutes.
	StartTimeout time.Duration
	// IPCDir is where ipc:// sockets for engines on this host are made;
	// "": a new directory under os.TempDir.
	IPCDir string
	// OnAttach is called (on the handshake goroutine) when an engine rank
	// is up; OnDetach when it is gone (after each of its calls ended).
	OnAttach func(*Engine)
	OnDetach func(*Engine, error)
	// OnError reports an engine refused during the handshake (a version
	// mismatch, a broken message); nil: dropped.
	OnError func(error)
}

// Frontend is the bound handshake address and the engines attached to it.
// Safe for concurrent use.
type Frontend struct {
	opts    Options
	ln      net.Listener
	ipcDir  string
	ownsIPC bool

	mu      sync.Mutex
	engines map[int]*Engine
	closed  bool
	wg      sync.WaitGroup
	attach  *sync.Cond
}

// Listen binds the handshake address (tcp://HOST:PORT, or HOST:PORT) and
// starts accepting engines.
func Listen(addr string, o Options) (*Frontend, error) {
	if _, _, err := zmtp.Split(addr); err != nil {
		addr = "tcp://" + addr
	}
	ln, err := zmtp.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("vllmcore: bind %s: %w", addr, err)
	}
	f := &Frontend{opts: o, ln: ln, engines: map[int]*Engine{}}
	f.attach = sync.NewCond(&f.mu)
	if f.opts.StartTimeout == 0 {
		f.opts.StartTimeout = 10 * time.Minute
	}
	f.ipcDir = o.IPCDir
	if f.ipcDir == "" {
		d, err := os.MkdirTemp("", "vajra-vllmcore-")
		if err != nil {
			ln.Close()
			return nil, err
		}
		f.ipcDir, f.ownsIPC = d, true
	}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// Addr is the bound handshake address (host:port).
func (f *Frontend) Addr() net.Addr { return f.ln.Addr() }

// Engines lists the attached engines, by rank.
func (f *Frontend) Engines() []*Engine {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*Engine, 0, len(f.engines))
	for r := 0; len(out) < len(f.engines); r++ {
		if e := f.engines[r]; e != nil {
			out = append(out, e)
		}
	}
	return out
}

// Wait blocks until n engines are attached or the deadline passes.
func (f *Frontend) Wait(n int, timeout time.Duration) ([]*Engine, error) {
	t := time.AfterFunc(timeout, func() {
		f.mu.Lock()
		f.attach.Broadcast()
		f.mu.Unlock()
	})
	defer t.Stop()
	deadline := time.Now().Add(timeout)
	f.mu.Lock()
	for len(f.engines) < n && !f.closed && time.Now().Before(deadline) {
		f.attach.Wait()
	}
	got := len(f.engines)
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if got < n {
		return nil, fmt.Errorf("vllmcore: %d of %d engines attached after %v", got, n, timeout)
	}
	return f.Engines(), nil
}

// Close stops accepting engines and closes every attached one (each call
// ends with an error). The engines themselves keep running and may attach
// to a new Frontend only when restarted.
func (f *Frontend) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	es := make([]*Engine, 0, len(f.engines))
	for _, e := range f.engines {
		es = append(es, e)
	}
	f.attach.Broadcast()
	f.mu.Unlock()
	err := f.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil // Adopt's, closed once the engines attached
	}
	for _, e := range es {
		e.Close()
	}
	f.wg.Wait()
	if f.ownsIPC {
		os.RemoveAll(f.ipcDir)
	}
	return err
}

func (f *Frontend) accept() {
	defer f.wg.Done()
	for {
		nc, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			if err := f.handshake(nc); err != nil {
				nc.Close()
				if f.opts.OnError != nil {
					f.opts.OnError(err)
				}
			}
		}()
	}
}

// handshake runs one engine's start-up: HELLO on the handshake
// connection, the addresses of its own request and output listeners, its
// connections there and its registration, then READY.
func (f *Frontend) handshake(nc net.Conn) error {
	hs, err := zmtp.Server(nc, "ROUTER", 10*time.Second)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	if len(hs.Identity) != 2 {
		return fmt.Errorf("%w: engine identity of %d bytes (want its rank as 2 bytes)", ErrHandshake, len(hs.Identity))
	}
	rank := int(binary.LittleEndian.Uint16(hs.Identity))
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	frames, err := hs.ReadMsg()
	if err != nil {
		return fmt.Errorf("%w: engine %d: %v", ErrHandshake, rank, err)
	}
	hello, err := v032.DecodeHello(frames[len(frames)-1])
	if err != nil {
		return fmt.Errorf("%w: engine %d: %v", ErrHandshake, rank, err)
	}
	if hello.Status != "HELLO" {
		return fmt.Errorf("%w: engine %d: first message %q (want HELLO)", ErrHandshake, rank, hello.Status)
	}
	inLn, outLn, err := f.listeners(nc, rank)
	if err != nil {
		return err
	}
	defer inLn.Close()
	defer outLn.Close()
	if err := hs.WriteMsg(v032.AppendInit(nil, zmtp.Endpoint(inLn.Addr()), zmtp.Endpoint(outLn.Addr()))); err != nil {
		return fmt.Errorf("%w: engine %d: %v", ErrHandshake, rank, err)
	}
	deadline := time.Now().Add(f.opts.StartTimeout)
	in, err := acceptOne(inLn, "ROUTER", deadline)
	if err != nil {
		return fmt.Errorf("%w: engine %d's request connection: %v", ErrHandshake, rank, err)
	}
	out, err := acceptOne(outLn, "PULL", deadline)
	if err != nil {
		in.Close()
		return fmt.Errorf("%w: engine %d's output connection: %v", ErrHandshake, rank, err)
	}
	fail := func(err error) error { in.Close(); out.Close(); return err }
	in.SetReadDeadline(deadline)
	reg, err := in.ReadMsg()
	if err != nil {
		return fail(fmt.Errorf("%w: engine %d's registration: %v", ErrHandshake, rank, err))
	}
	ready, err := v032.DecodeReady(reg[len(reg)-1])
	if err != nil {
		return fail(fmt.Errorf("%w: engine %d's registration: %v", ErrHandshake, rank, err))
	}
	if !v032.Compatible(ready.VLLMVersion) {
		return fail(fmt.Errorf("%w: engine %d runs vLLM %s, this Vajra speaks vLLM %s.x's engine protocol: run the engine with vllm %s.x, or a Vajra built for vLLM %s",
			ErrVersion, rank, ready.VLLMVersion, v032.Version, v032.Version, ready.VLLMVersion))
	}
	in.SetReadDeadline(time.Time{})
	nc.SetReadDeadline(deadline)
	frames, err = hs.ReadMsg()
	if err != nil {
		return fail(fmt.Errorf("%w: engine %d's READY: %v", ErrHandshake, rank, err))
	}
	if st, err := v032.DecodeHello(frames[len(frames)-1]); err != nil || st.Status != "READY" {
		return fail(fmt.Errorf("%w: engine %d: message %q after registration (want READY): %v", ErrHandshake, rank, st.Status, err))
	}
	hs.Close()
	e := newEngine(f, rank, ready, in, out)
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		e.Close()
		return ErrClosed
	}
	old := f.engines[rank]
	f.engines[rank] = e
	f.attach.Broadcast()
	f.mu.Unlock()
	if old != nil {
		old.fail(fmt.Errorf("%w: engine %d attached again", ErrEngineDead, rank))
	}
	e.start()
	if f.opts.OnAttach != nil {
		f.opts.OnAttach(e)
	}
	return nil
}

// detach removes e once it is gone.
func (f *Frontend) detach(e *Engine, err error) {
	f.mu.Lock()
	if f.engines[e.rank] == e {
		delete(f.engines, e.rank)
	}
	f.mu.Unlock()
	if f.opts.OnDetach != nil {
		f.opts.OnDetach(e, err)
	}
}

// listeners binds the engine's request and output addresses: ipc:// when
// the engine connected from this host, tcp:// on the handshake's address
// otherwise.
func (f *Frontend) listeners(nc net.Conn, rank int) (net.Listener, net.Listener, error) {
	var in, out string
	if local(nc) {
		stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
		in = "ipc://" + filepath.Join(f.ipcDir, "in-"+strconv.Itoa(rank)+"-"+stamp)
		out = "ipc://" + filepath.Join(f.ipcDir, "out-"+strconv.Itoa(rank)+"-"+stamp)
	} else {
		host, _, _ := net.SplitHostPort(nc.LocalAddr().String())
		in = "tcp://" + net.JoinHostPort(host, "0")
		out = in
	}
	inLn, err := zmtp.Listen(in)
	if err != nil {
		return nil, nil, fmt.Errorf("vllmcore: engine %d: %w", rank, err)
	}
	outLn, err := zmtp.Listen(out)
	if err != nil {
		inLn.Close()
		return nil, nil, fmt.Errorf("vllmcore: engine %d: %w", rank, err)
	}
	return inLn, outLn, nil
}

// local says whether the peer of nc runs on this host.
func local(nc net.Conn) bool {
	ra, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return true // a unix socket
	}
	if ra.IP.IsLoopback() {
		return true
	}
	la, ok := nc.LocalAddr().(*net.TCPAddr)
	return ok && la.IP.Equal(ra.IP)
}

func acceptOne(ln net.Listener, sockType string, deadline time.Time) (*zmtp.Conn, error) {
	type deadliner interface{ SetDeadline(time.Time) error }
	if d, ok := ln.(deadliner); ok {
		d.SetDeadline(deadline)
	}
	nc, err := ln.Accept()
	if err != nil {
		return nil, err
	}
	c, err := zmtp.Server(nc, sockType, 10*time.Second)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}
