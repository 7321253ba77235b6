package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/vajra-go/vajra"
)

// Idle is the state the soak compares before and after load: the
// server's live figures and the process's goroutines, file descriptors
// and resident memory. The soak runs the server in its own process, so
// the process's figures are the server's plus the (by then finished)
// clients'.
type Idle struct {
	Live       vajra.Live
	Goroutines int
	FDs        int
	RSS        int64 // bytes, after debug.FreeOSMemory
	// Scraped is what /metrics said at the same time (its own scrape's
	// connection included in open connections).
	Scraped Scrape
}

// Scrape holds the /metrics figures the soak reads.
type Scrape struct {
	OpenConnections float64 // vajra_open_connections
	Running         float64 // vllm:num_requests_running
	Waiting         float64 // vllm:num_requests_waiting
	StoreCount      float64 // vajra_responses_store_count
	ParseErrors     float64 // vajra_parse_errors_total
	ClientAborts    float64 // vajra_client_disconnect_aborts_total
	SlowConsumers   float64 // vajra_slow_consumer_aborts_total
	SessionPanics   float64 // vajra_session_panics_total (0 when absent)
}

// countFDs counts the process's open file descriptors (/proc/self/fd; the
// directory's own descriptor is counted once and subtracted).
func countFDs() int {
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		return -1
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return -1
	}
	return len(names) - 1
}

// rss is the process's resident set size in bytes (/proc/self/statm,
// second field, in pages).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return -1
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return -1
	}
	return pages * int64(os.Getpagesize())
}

// freedRSS returns the RSS after a forced collection that returns freed
// memory to the OS, so that two readings compare live memory rather than
// what the runtime has yet to give back.
func freedRSS() int64 {
	debug.FreeOSMemory()
	return rss()
}

// scrape reads /metrics over a fresh connection that asks to be closed.
func scrape(ctx context.Context, addr string) (Scrape, error) {
	var s Scrape
	d := net.Dialer{}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return s, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n"); err != nil {
		return s, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("soak: /metrics answered %d", resp.StatusCode)
	}
	fields := map[string]*float64{
		"vajra_open_connections":               &s.OpenConnections,
		"vllm:num_requests_running":            &s.Running,
		"vllm:num_requests_waiting":            &s.Waiting,
		"vajra_responses_store_count":          &s.StoreCount,
		"vajra_parse_errors_total":             &s.ParseErrors,
		"vajra_client_disconnect_aborts_total": &s.ClientAborts,
		"vajra_slow_consumer_aborts_total":     &s.SlowConsumers,
		"vajra_session_panics_total":           &s.SessionPanics,
	}
	seen := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		p, ok := fields[name]
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return s, fmt.Errorf("soak: /metrics line %q: %w", line, err)
		}
		*p += v // summed over labels (one model)
		seen++
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	if seen < 4 {
		return s, errors.New("soak: /metrics lacks the gauges the soak reads")
	}
	return s, nil
}

// idleServer reports whether the server holds nothing: no connection but
// the scrape's, nothing in flight, no session actor, nothing in the
// engine, no stored response.
func idleServer(l vajra.Live, sc Scrape) bool {
	return l.Connections == 0 && l.InFlight == 0 && l.Sessions == 0 && l.Running == 0 && l.Waiting == 0 &&
		l.StoredResponses == 0 &&
		sc.OpenConnections <= 1 && sc.Running == 0 && sc.Waiting == 0 && sc.StoreCount == 0
}

// pollInterval is how often waitIdle looks again.
const pollInterval = 100 * time.Millisecond

// waitIdle polls until the server is idle and, when base is not nil, the
// goroutines and descriptors are back to base's and the RSS within
// rssSlack of it (not checked when rssSlack < 0); or until the deadline, when it returns the last reading
// and an error naming what did not return.
func waitIdle(ctx context.Context, srv *vajra.Server, addr string, base *Idle, rssSlack float64, deadline time.Duration) (Idle, time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	var cur Idle
	lastRSS := time.Time{}
	for {
		var err error
		cur.Scraped, err = scrape(ctx, addr)
		cur.Live = srv.Live()
		cur.Goroutines = runtime.NumGoroutine()
		cur.FDs = countFDs()
		var why string
		switch {
		case err != nil:
			why = err.Error()
		case !idleServer(cur.Live, cur.Scraped):
			why = fmt.Sprintf("server not idle: %+v, /metrics %+v", cur.Live, cur.Scraped)
		case base != nil && cur.Goroutines > base.Goroutines:
			why = fmt.Sprintf("goroutines %d, idle %d", cur.Goroutines, base.Goroutines)
		case base != nil && cur.FDs > base.FDs:
			why = fmt.Sprintf("file descriptors %d, idle %d", cur.FDs, base.FDs)
		default:
			// The RSS needs a full collection per reading: at most one
			// every half second.
			if time.Since(lastRSS) >= 500*time.Millisecond {
				cur.RSS, lastRSS = freedRSS(), time.Now()
			}
			if base == nil || rssSlack < 0 || float64(cur.RSS) <= float64(base.RSS)*(1+rssSlack) {
				return cur, time.Since(start), nil
			}
			why = fmt.Sprintf("RSS %s, post-warm-up %s (+%.0f %% allowed)", mib(cur.RSS), mib(base.RSS), rssSlack*100)
		}
		select {
		case <-ctx.Done():
			if cur.RSS == 0 {
				cur.RSS = freedRSS()
			}
			return cur, time.Since(start), fmt.Errorf("soak: not idle after %v: %s", deadline, why)
		case <-time.After(pollInterval):
		}
	}
}

// mib formats bytes as MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
