package remote

import (
	"context"
	"errors"
	"slices"

	"go.uber.org/zap"
)

// watchPool makes each member of p, configured as u, a Worker while it is
// attached.
func (e *Engine) watchPool(u string, p Pool) {
	p.Watch(func(url string, c Client) { e.join(u, url, c) }, func(c Client) { e.leave(u, c) })
}

// join adds an attached member of pool u as a Worker: probed at once,
// serving once healthy.
func (e *Engine) join(u, url string, c Client) {
	e.wsMu.Lock()
	defer e.wsMu.Unlock()
	if e.closed.Load() || e.pools[u] == nil {
		return // the pool is being closed: the member leaves with it
	}
	w := newWorker(url, c)
	w.pool = u
	next := append(slices.Clone(e.list()), w)
	e.wsp.Store(&next)
	e.wg.Add(1)
	go func() { e.probe(w); e.watch(w) }()
	e.log.Info("worker attached", zap.String("worker", url))
}

// leave removes the member c of pool u: it takes no new request (its
// calls have ended already) and is forgotten.
func (e *Engine) leave(u string, c Client) {
	e.wsMu.Lock()
	var gone *Worker
	for _, w := range e.list() {
		if w.client == c && w.pool == u && !w.draining.Load() {
			gone = w
			break
		}
	}
	if gone != nil {
		gone.healthy.Store(false)
		gone.draining.Store(true)
		if l := gone.load.Load(); l != nil {
			e.goneQueries.Add(l.PrefixQueries)
			e.goneHits.Add(l.PrefixHits)
		}
	}
	e.wsMu.Unlock()
	if gone != nil {
		e.log.Warn("worker detached", zap.String("worker", gone.url))
		e.retire(gone)
	}
}

// closePools closes the pools of ps (not holding wsMu: their members
// leave through leave, which takes it).
func closePools(ps []Pool) {
	for _, p := range ps {
		_ = p.Close()
	}
}

// Controller is a Client whose worker takes vLLM's engine control calls
// (the engine core's utility calls: vllm-core://), which the server
// serves as vLLM does (POST /reset_prefix_cache, /sleep, /wake_up, GET
// /is_sleeping). Safe for concurrent use.
type Controller interface {
	// ResetPrefixCache empties the worker's prefix cache (also the
	// running requests' blocks with resetRunning, and an external
	// connector's cache with resetExternal); false when it could not
	// (blocks still held by running requests).
	ResetPrefixCache(ctx context.Context, resetRunning, resetExternal bool) (bool, error)
	// Sleep pauses scheduling (level 0), also frees the weights (1) or
	// discards them (2); mode says what becomes of running requests
	// ("abort", "wait" or "keep").
	Sleep(ctx context.Context, level int, mode string) error
	// WakeUp undoes Sleep for tags (nil: everything); it reports whether
	// the worker is fully awake.
	WakeUp(ctx context.Context, tags []string) (bool, error)
	// IsSleeping reports whether the worker sleeps at any level.
	IsSleeping(ctx context.Context) (bool, error)
}

// ErrNoController reports a control call on an engine with no worker of
// a protocol that takes it (no vllm-core:// worker).
var ErrNoController = errors.New("remote: no worker takes engine control calls (serve a vllm-core:// worker)")

// controllers are the healthy workers whose clients are Controllers. It
// fails with ErrNoController when no configured worker could be one, and
// with a 503 *WorkerError when none is attached and healthy now.
func (e *Engine) controllers() ([]Controller, error) {
	var out []Controller
	for _, w := range e.list() {
		if c, ok := w.client.(Controller); ok && w.healthy.Load() && !w.draining.Load() {
			out = append(out, c)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	e.wsMu.Lock()
	pools := len(e.pools)
	e.wsMu.Unlock()
	if pools == 0 {
		return nil, ErrNoController
	}
	return nil, &WorkerError{Worker: "vllm-core", Status: 503, Message: "no engine is attached"}
}

// ResetPrefixCache empties the prefix cache of every attached worker that
// takes control calls; it reports whether all of them did.
func (e *Engine) ResetPrefixCache(ctx context.Context, resetRunning, resetExternal bool) (bool, error) {
	cs, err := e.controllers()
	if err != nil {
		return false, err
	}
	all := true
	for _, c := range cs {
		ok, err := c.ResetPrefixCache(ctx, resetRunning, resetExternal)
		if err != nil {
			return false, err
		}
		all = all && ok
	}
	return all, nil
}

// Sleep puts every attached worker that takes control calls to sleep.
func (e *Engine) Sleep(ctx context.Context, level int, mode string) error {
	cs, err := e.controllers()
	if err != nil {
		return err
	}
	for _, c := range cs {
		if err := c.Sleep(ctx, level, mode); err != nil {
			return err
		}
	}
	return nil
}

// WakeUp wakes every attached worker that takes control calls; it reports
// whether all are fully awake.
func (e *Engine) WakeUp(ctx context.Context, tags []string) (bool, error) {
	cs, err := e.controllers()
	if err != nil {
		return false, err
	}
	all := true
	for _, c := range cs {
		ok, err := c.WakeUp(ctx, tags)
		if err != nil {
			return false, err
		}
		all = all && ok
	}
	return all, nil
}

// IsSleeping reports whether any attached worker that takes control calls
// sleeps.
func (e *Engine) IsSleeping(ctx context.Context) (bool, error) {
	cs, err := e.controllers()
	if err != nil {
		return false, err
	}
	for _, c := range cs {
		s, err := c.IsSleeping(ctx)
		if err != nil || s {
			return s, err
		}
	}
	return false, nil
}
