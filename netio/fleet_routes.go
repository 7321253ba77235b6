package netio

import (
	"strconv"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/httpparse"
	"github.com/vajra-go/vajra/metrics"
)

// addFleetRoutes registers what a node of a load-balanced fleet serves
// besides the APIs: metrics, load, version, tokenize.
//
// /load and /version are answered on the loop (a few atomic loads).
// /metrics is not cheap (rendering every metric): it runs off the loop
// (offloop.go), through the same exchange plumbing as sessions, so
// pipelined responses stay in order. /metrics is public unless
// Options.ProtectMetrics (setupFleet). /tokenize and /detokenize are
// session routes (actors/dialect_tokenize.go decodes, tokenizes and
// answers); they generate nothing, so they take no admission permit, and
// like vLLM's they accept a body of any Content-Type.
func addFleetRoutes(t *routeTable) {
	t.add("/metrics", &route{name: "metrics", method: "GET", public: true})
	t.add("/load", &route{name: "load", method: "GET", inline: (*Server).handleLoad})
	t.add("/version", &route{name: "version", method: "GET", inline: (*Server).handleVersion})
	t.add("/workers", &route{name: "workers", method: "GET"})
	t.add("/tokenize", &route{name: "tokenize", method: "POST", endpoint: actors.EndpointTokenize, utility: true})
	t.add("/detokenize", &route{name: "detokenize", method: "POST", endpoint: actors.EndpointDetokenize, utility: true})
	addControlRoutes(t)
}

// offloopFunc answers an off-loop route from its query and body (private
// copies).
type offloopFunc func(s *Server, query, body []byte) (status int, contentType string, out []byte)

// offloopRoutes are the routes answered off the loop, by route name. A
// route is off-loop when it has neither inline nor endpoint.
var offloopRoutes = map[string]offloopFunc{
	"metrics": (*Server).serveMetrics,
	"workers": (*Server).serveWorkers,
	// control_routes.go
	"reset_prefix_cache": (*Server).serveResetPrefixCache,
	"sleep":              (*Server).serveSleep,
	"wake_up":            (*Server).serveWakeUp,
	"is_sleeping":        (*Server).serveIsSleeping,
}

// serveWorkers answers GET /workers: the remote engine's workers with
// their state (Options.Workers), 404 without remote workers.
func (s *Server) serveWorkers(_, _ []byte) (int, string, []byte) {
	if s.opts.Workers == nil {
		return 404, contentTypeJSON, appendErrorBody(nil, dialectOpenAI, 404, "not_found", "This server has no remote workers (--worker).")
	}
	return 200, contentTypeJSON, s.opts.Workers()
}

// setupFleet applies the options to the fleet routes and prepares the
// per-route metrics. Called once by New.
func (s *Server) setupFleet() {
	for _, rs := range s.routes.exact {
		for _, r := range rs {
			if r.name == "metrics" {
				r.public = !s.opts.ProtectMetrics
			}
		}
	}
	s.versionBody = append(codegen.AppendJSONStringS([]byte(`{"version":`), s.opts.Version), '}')
	s.retryHeaders = appendRetryHeaders(nil, s.opts.RetryAfter)
	s.cors = newCORSPolicy(s.opts.AllowedOrigins)
	if s.opts.MaxConcurrentRequests > 0 {
		s.adm = &admission{maxRunning: s.opts.MaxConcurrentRequests, maxQueued: max(0, s.opts.MaxQueuedRequests)}
	}
	m := s.opts.Metrics
	if m == nil {
		m = metrics.New(s.opts.Models, metrics.Sources{}) // counted, never rendered
	}
	s.rejected.overloaded = m.Rejected("overloaded")
	s.rejected.draining = m.Rejected("draining")
	s.rejected.maxConns = m.Rejected("max_connections")
	s.rejected.unauthorized = m.Rejected("unauthorized")
	s.rejected.timeout = m.Rejected("request_timeout")
	s.rejected.queueTimeout = m.Rejected("queue_timeout")
	s.rejected.descriptors = m.Rejected("descriptors")
	s.routeMetrics = map[*route]*metrics.Route{notFound: m.Route(notFound.name)}
	add := func(r *route) { s.routeMetrics[r] = m.Route(r.name) }
	for _, rs := range s.routes.exact {
		for _, r := range rs {
			add(r)
		}
	}
	for _, p := range s.routes.prefixes {
		for _, r := range p.routes {
			add(r)
		}
	}
}

// ServerStats returns the network layer's counters for metrics. Safe for
// concurrent use.
func (s *Server) ServerStats() metrics.ServerStats {
	st := metrics.ServerStats{
		OpenConnections: s.openConns.Load(),
		BytesWritten:    s.bytesWritten.Load(),
		ParseErrors:     s.parseErrors.Load(),
		SlowConsumers:   s.slowConsumers.Load(),
		ClientAborts:    s.clientAborts.Load(),
		LoopWakes:       s.Wakes(),
		IOUringLoops:    int64(s.ringLoops.Load()),
		IdleClosed:      s.idleClosed.Load(),
		Keepalives:      s.keepalives.Load(),
	}
	s.loops.Range(func(_, v any) bool {
		l := v.(*loop)
		st.IOUringSubmits += l.ringSubmits.Load()
		st.IOUringSends += l.ringSends.Load()
		return true
	})
	s.webSocketStats(&st)
	return st
}

// handleLoad answers GET /load: the engine's load and Vajra's own, for
// routers that balance on it ("server_load" is vLLM's field: requests in
// flight).
func (s *Server) handleLoad(dst []byte, req *httpparse.Request) []byte {
	var st engine.Stats
	if s.opts.Engine != nil {
		st = s.opts.Engine.Stats()
	}
	var b [160]byte
	body := append(b[:0], `{"server_load":`...)
	body = strconv.AppendInt(body, s.sessions.Active(), 10)
	body = append(body, `,"running":`...)
	body = strconv.AppendInt(body, int64(st.Running), 10)
	body = append(body, `,"waiting":`...)
	body = strconv.AppendInt(body, int64(st.Waiting), 10)
	if s.adm != nil {
		body = append(body, `,"queued":`...)
		body = strconv.AppendInt(body, int64(s.adm.queuedLen()), 10)
	}
	body = append(body, `,"kv_cache_usage_perc":`...)
	body = strconv.AppendFloat(body, st.KVUsage, 'f', -1, 64)
	body = append(body, '}')
	return appendResponse(dst, req.Minor, 200, contentTypeJSON, "", nil, body, !req.KeepAlive)
}

// handleVersion answers GET /version.
func (s *Server) handleVersion(dst []byte, req *httpparse.Request) []byte {
	return appendResponse(dst, req.Minor, 200, contentTypeJSON, "", nil, s.versionBody, !req.KeepAlive)
}

// serveMetrics renders every metric. Off-loop.
func (s *Server) serveMetrics(_, _ []byte) (int, string, []byte) {
	if s.opts.Metrics == nil {
		return 404, contentTypeJSON, appendErrorBody(nil, dialectOpenAI, 404, "not_found", "Metrics are not enabled.")
	}
	out, err := s.opts.Metrics.AppendText(nil)
	if err != nil {
		s.log.Warn("metrics: gather", zap.Error(err))
		// What gathered is still worth serving (Prometheus does the same).
	}
	return 200, metrics.ContentType, out
}
