package remote

import "time"

// NewTestWorker returns a Worker that no engine runs, for the tests and
// benchmarks of a routing layer (engine/route), which set its figures by
// hand with the methods below. The engine keeps its own workers' figures;
// nothing else may call these on them.
func NewTestWorker(url string, info *Info) *Worker {
	w := newWorker(url, nil)
	w.healthy.Store(true)
	if info != nil {
		w.info.Store(info)
	}
	return w
}

// TestAddInFlight adds d to a test worker's requests in flight.
func (w *Worker) TestAddInFlight(d int) { w.inflight.Add(int64(d)) }

// TestSetLoad stores a test worker's own load report, as made at at.
func (w *Worker) TestSetLoad(l Load, at time.Time) {
	w.load.Store(&l)
	w.loadAt.Store(at.UnixNano())
}

// TestSetDraining marks a test worker removed.
func (w *Worker) TestSetDraining(d bool) { w.draining.Store(d) }
