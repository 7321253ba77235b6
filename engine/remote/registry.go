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

var registry struct {
	sync.RWMutex
	dial map[string]DialFunc
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
	registry.dial[scheme] = dial
}

// Schemes lists the registered URL schemes, sorted.
func Schemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.dial))
	for s := range registry.dial {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Dial makes the Client of rawURL's scheme. Safe for concurrent use.
func Dial(rawURL string, opts DialOptions) (Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("remote: worker %q: want SCHEME://HOST:PORT (schemes: %s)", rawURL, strings.Join(Schemes(), ", "))
	}
	registry.RLock()
	dial := registry.dial[u.Scheme]
	registry.RUnlock()
	if dial == nil {
		return nil, fmt.Errorf("remote: worker %q: unknown protocol %q (known: %s)", rawURL, u.Scheme, strings.Join(Schemes(), ", "))
	}
	return dial(rawURL, opts)
}
