package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Server allocations are read from the server's own /metrics:
// go_gc_heap_allocs_objects_total is runtime/metrics' count of heap
// allocations, exported by Prometheus's Go collector (vajra serve exports
// it). The count is read at the window's two ends; the scrape itself
// allocates in the server, so the cost of one scrape, measured before the
// run with two scrapes back to back, is taken off.

const allocsMetric = "go_gc_heap_allocs_objects_total"

// allocWatch reads a server's allocation count.
type allocWatch struct {
	url  string // .../metrics; empty: off
	at   [2]float64
	ok   [2]bool
	cost float64 // allocations of one scrape
}

// calibrate measures one scrape's own allocations: scrape, scrape, diff.
// Run it before load starts.
func (a *allocWatch) calibrate(ctx context.Context) error {
	if a.url == "" {
		return nil
	}
	first, err := scrapeMetric(ctx, a.url, allocsMetric)
	if err != nil {
		return err
	}
	second, err := scrapeMetric(ctx, a.url, allocsMetric)
	if err != nil {
		return err
	}
	a.cost = max(0, second-first)
	return nil
}

func (a *allocWatch) mark(ctx context.Context, i int) {
	if a.url == "" {
		return
	}
	v, err := scrapeMetric(ctx, a.url, allocsMetric)
	a.at[i], a.ok[i] = v, err == nil
}

// perToken returns the server's allocations per delivered token in the
// window, or -1 when unknown.
func (a *allocWatch) perToken(tokens int64) (allocs float64, perToken float64) {
	if a.url == "" || !a.ok[0] || !a.ok[1] || tokens <= 0 {
		return -1, -1
	}
	n := max(0, a.at[1]-a.at[0]-a.cost)
	return n, n / float64(tokens)
}

// scrapeMetric fetches url (a Prometheus text exposition) and returns the
// value of the sample called name, which must have no labels.
func scrapeMetric(ctx context.Context, url, name string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%w: %s: %d", ErrStatus, url, res.StatusCode)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%w: %s has no %s", ErrProtocol, url, name)
}
