package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestAllocWatch: the window's allocations are the difference of the two
// marks minus one scrape's own cost, measured by calibrate.
func TestAllocWatch(t *testing.T) {
	var n atomic.Int64
	n.Store(1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// Every scrape "allocates" 7; the workload adds what the test says.
		v := n.Add(7)
		fmt.Fprintf(w, "# TYPE go_gc_heap_allocs_objects_total counter\ngo_gc_heap_allocs_objects_total %d\nother_metric 1\n", v)
	}))
	defer srv.Close()
	a := allocWatch{url: srv.URL}
	ctx := context.Background()
	if err := a.calibrate(ctx); err != nil {
		t.Fatal(err)
	}
	if a.cost != 7 {
		t.Fatalf("scrape cost %v, want 7", a.cost)
	}
	a.mark(ctx, 0)
	n.Add(500) // the workload
	a.mark(ctx, 1)
	allocs, per := a.perToken(1000)
	if allocs != 500 || per != 0.5 {
		t.Fatalf("allocs %v, per token %v; want 500 and 0.5", allocs, per)
	}
	if _, per := (&allocWatch{}).perToken(10); per != -1 {
		t.Fatalf("unmeasured watch reports %v", per)
	}
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "other_metric 1")
	}))
	defer bare.Close()
	if _, err := scrapeMetric(ctx, bare.URL, allocsMetric); err == nil {
		t.Fatal("a /metrics without the allocation count was accepted")
	}
}
