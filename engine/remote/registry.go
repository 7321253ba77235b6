package remote

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// DialOptions are what every protocol client is dialled with.
type DialOptions struct {
	// ConnectTimeout bounds one connection attempt (0: 5 s).
	ConnectTimeout time.Duration
	// MaxConns caps the connections a client opens to its worker, for a
	// protocol that needs one per request in flight (llama-server); 0:
	// no cap.
	MaxConns int
}

// DialFunc makes a Client for the worker at rawURL (scheme://host:port).
// It must not wait for the worker: a worker that is down at start is
// dialled all the same, and its Health fails until it is up.
type DialFunc func(rawURL string, opts DialOptions) (Client, error)

// Pool is a set of workers that attach by themselves rather than being
// dialled: vLLM's engine ranks connecting to the address Vajra binds
// (vllm-core://). The engine makes each member a Worker of its own while
// it is attached. Safe for concurrent use.
type Pool interface {
	// Watch starts reporting the members: join for each one that
	// attaches (its URL names it in logs and errors; a member attached
	// again has the same URL and a new Client), leave with the same
	// Client once it is gone (after each of its calls ended). It is
	// called once; the callbacks run on the pool's goroutines, one at a
	// time, and may take locks of the engine's.
	Watch(join func(url string, c Client), leave func(c Client))
	// Close stops accepting members and closes the attached ones (each
	// leaves). Idempotent.
	Close() error
}

// PoolFunc makes the Pool of rawURL (scheme://host:port, the address the
// pool binds). It fails when the address cannot be bound.
type PoolFunc func(rawURL string, opts DialOptions) (Pool, error)

var registry struct {
	sync.RWMutex
	dial map[string]DialFunc
	pool map[string]PoolFunc
}

// Register makes the protocol of URL scheme scheme available to Dial. The
// protocol packages call it from their init; registering a scheme twice
// panics. Safe for concurrent use.
func Register(scheme string, dial DialFunc) {
	registry.Lock()
	defer registry.Unlock()
	if registry.dial == nil {
		registry.dial = map[string]DialFunc{}
	}
	if _, dup := registry.dial[scheme]; dup {
		panic("remote: protocol " + scheme + " registered twice")
	}
	if _, dup := registry.pool[scheme]; dup {
		panic("remote: protocol " + scheme + " registered twice")
	}
	registry.dial[scheme] = dial
}

// RegisterPool makes the pool protocol of URL scheme scheme available:
// a worker URL of that scheme is a Pool (see there), not a Client. The
// protocol packages call it from their init; registering a scheme twice
// panics. Safe for concurrent use.
func RegisterPool(scheme string, open PoolFunc) {
	registry.Lock()
	defer registry.Unlock()
	if registry.pool == nil {
		registry.pool = map[string]PoolFunc{}
	}
	if _, dup := registry.pool[scheme]; dup {
		panic("remote: protocol " + scheme + " registered twice")
	}
	if _, dup := registry.dial[scheme]; dup {
		panic("remote: protocol " + scheme + " registered twice")
	}
	registry.pool[scheme] = open
}

// Schemes lists the registered URL schemes, sorted.
func Schemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.dial)+len(registry.pool))
	for s := range registry.dial {
		out = append(out, s)
	}
	for s := range registry.pool {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Dial makes the Client of rawURL's scheme. Safe for concurrent use.
func Dial(rawURL string, opts DialOptions) (Client, error) {
	c, p, err := open(rawURL, opts)
	if err == nil && p != nil {
		_ = p.Close()
		return nil, fmt.Errorf("remote: worker %q: a pool of workers that attach, not one worker", rawURL)
	}
	return c, err
}

// open makes the Client, or the Pool, of rawURL's scheme.
func open(rawURL string, opts DialOptions) (Client, Pool, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, nil, fmt.Errorf("remote: worker %q: want SCHEME://HOST:PORT (schemes: %s)", rawURL, strings.Join(Schemes(), ", "))
	}
	registry.RLock()
	dial, pool := registry.dial[u.Scheme], registry.pool[u.Scheme]
	registry.RUnlock()
	switch {
	case dial != nil:
		c, err := dial(rawURL, opts)
		return c, nil, err
	case pool != nil:
		p, err := pool(rawURL, opts)
		return nil, p, err
	}
	return nil, nil, fmt.Errorf("remote: worker %q: unknown protocol %q (known: %s)", rawURL, u.Scheme, strings.Join(Schemes(), ", "))
}
