package route

import (
	"encoding/json"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vajra-go/vajra/engine/remote"
)

var (
	wl          = []string{"worker"}
	descReqs    = prometheus.NewDesc("vajra_worker_requests_total", "Requests (attempts) routed to the worker.", wl, nil)
	descFlight  = prometheus.NewDesc("vajra_worker_requests_in_flight", "Vajra's requests running on the worker.", wl, nil)
	descErrors  = prometheus.NewDesc("vajra_worker_errors_total", "Requests the worker failed or refused (its circuit breaker counts them).", wl, nil)
	descUp      = prometheus.NewDesc("vajra_worker_up", "1 when the worker's health check passes and it is not draining.", wl, nil)
	descCircuit = prometheus.NewDesc("vajra_worker_circuit_state", "The worker's circuit breaker: 0 closed, 1 half open, 2 open.", wl, nil)
	descPrompt  = prometheus.NewDesc("vajra_worker_prompt_tokens_total", "Prompt tokens routed to the worker.", wl, nil)
	descEstHit  = prometheus.NewDesc("vajra_worker_prefix_hit_tokens_estimated_total", "Prompt tokens routed to the worker that the router estimated it held in its KV cache.", wl, nil)
	descRatio   = prometheus.NewDesc("vajra_worker_prefix_hit_ratio", "The router's estimated prefix-hit ratio on the worker: estimated hit tokens over prompt tokens.", wl, nil)
	descCached  = prometheus.NewDesc("vajra_worker_cached_tokens_total", "Prompt tokens the worker reported as cached (cached_tokens).", wl, nil)
	descRepP    = prometheus.NewDesc("vajra_worker_reported_prompt_tokens_total", "Prompt tokens of the requests whose cached tokens the worker reported.", wl, nil)
	descRun     = prometheus.NewDesc("vajra_worker_load_running", "Requests running on the worker, as it last reported (-1: no report).", wl, nil)
	descWait    = prometheus.NewDesc("vajra_worker_load_waiting", "Requests waiting on the worker, as it last reported (-1: no report).", wl, nil)
	descBlocks  = prometheus.NewDesc("vajra_worker_prefix_blocks", "Prompt blocks the router remembers for the worker (cache_aware).", wl, nil)
)

// Collector exports the router's per-worker figures for the engine's
// workers (ws is called at each scrape) as Prometheus metrics.
func (r *Router) Collector(ws func() []*remote.Worker) prometheus.Collector {
	return collector{r, ws}
}

type collector struct {
	r  *Router
	ws func() []*remote.Worker
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReqs, descFlight, descErrors, descUp, descCircuit, descPrompt,
		descEstHit, descRatio, descCached, descRepP, descRun, descWait, descBlocks} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.r.Stats(c.ws()) {
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, s.URL)
		}
		n := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), s.URL)
		}
		n(descReqs, s.Requests)
		g(descFlight, float64(s.InFlight))
		n(descErrors, s.Errors)
		up := 0.0
		if s.State == "healthy" {
			up = 1
		}
		g(descUp, up)
		circuit := 0.0
		switch s.Circuit {
		case "half_open":
			circuit = 1
		case "open":
			circuit = 2
		}
		g(descCircuit, circuit)
		n(descPrompt, s.PromptTokens)
		n(descEstHit, s.EstimatedHitTokens)
		ratio := 0.0
		if s.PromptTokens > 0 {
			ratio = float64(s.EstimatedHitTokens) / float64(s.PromptTokens)
		}
		g(descRatio, ratio)
		n(descCached, s.CachedTokens)
		n(descRepP, s.ReportedPromptTokens)
		run, wait := -1.0, -1.0
		if s.LoadAge >= 0 {
			run, wait = float64(s.Load.Running), float64(s.Load.Waiting)
		}
		g(descRun, run)
		g(descWait, wait)
		g(descBlocks, float64(s.CachedBlocks))
	}
}

// WorkersJSON is the body of GET /workers: the policy and each worker
// with its state and figures.
func (r *Router) WorkersJSON(ws []*remote.Worker) []byte {
	b, err := json.Marshal(struct {
		Policy  string        `json:"policy"`
		Workers []WorkerStats `json:"workers"`
	}{r.cfg.Policy, r.Stats(ws)})
	if err != nil {
		return []byte(`{"error":"` + err.Error() + `"}`)
	}
	return b
}
