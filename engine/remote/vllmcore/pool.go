package vllmcore

import (
	"fmt"
	"net/url"
	"sync"

	"github.com/vajra-go/vajra/engine/remote"
)

// Scheme is the worker URL scheme of this protocol: vllm-core://HOST:PORT
// is the handshake address Vajra binds and engines connect to.
const Scheme = "vllm-core"

func init() { remote.RegisterPool(Scheme, openPool) }

// pool is a Frontend as a remote.Pool: each engine rank that attaches
// joins the remote engine as a worker of its own, and leaves when it is
// gone. Safe for concurrent use.
type pool struct {
	f *Frontend

	// mu serializes join and leave (and the replay in Watch), so that the
	// engine sees an engine's leave after its join, and none for an
	// engine gone before it joined.
	mu     sync.Mutex
	join   func(string, remote.Client)
	leave  func(remote.Client)
	joined map[*Engine]bool
	gone   map[*Engine]bool // detached before they were joined
}

// openPool binds rawURL's handshake address (vllm-core://HOST:PORT).
func openPool(rawURL string, _ remote.DialOptions) (remote.Pool, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("vllmcore: worker %q: want %s://HOST:PORT", rawURL, Scheme)
	}
	p := &pool{joined: map[*Engine]bool{}, gone: map[*Engine]bool{}}
	p.f, err = Listen("tcp://"+u.Host, Options{
		OnAttach: p.attached,
		OnDetach: func(e *Engine, _ error) { p.detached(e) },
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pool) attached(e *Engine) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.gone[e]:
		delete(p.gone, e)
	case p.join != nil && !p.joined[e]:
		p.joined[e] = true
		p.join(e.URL(), e)
	}
}

func (p *pool) detached(e *Engine) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.joined[e] {
		p.gone[e] = true // its attach is late, or Watch has not come
		return
	}
	delete(p.joined, e)
	p.leave(e)
}

// Watch implements remote.Pool.
func (p *pool) Watch(join func(string, remote.Client), leave func(remote.Client)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.join, p.leave = join, leave
	for _, e := range p.f.Engines() {
		if !p.gone[e] && !p.joined[e] {
			p.joined[e] = true
			join(e.URL(), e)
		}
	}
}

// Close implements remote.Pool: the handshake address is closed and each
// attached engine's calls end (the engines go on, and attach again to a
// front end that binds the address again).
func (p *pool) Close() error { return p.f.Close() }
