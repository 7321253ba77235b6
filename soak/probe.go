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
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

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
	// Processes is the count of protoactor's process registry: every
	// actor and future not yet stopped.
	Processes int
	RSS       int64 // bytes, after debug.FreeOSMemory
	// HeapLive is the heap the last forced collection marked live: the
	// reading that grows with a leak and not with what the runtime keeps
	// mapped (stack spans, fragmentation, freed pages not yet returned).
	HeapLive int64
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
func freedRSS() (rssBytes, heapLive int64) {
	// Two collections: a sync.Pool's items survive the first one (as its
	// victim cache), and the pools of this process (the SDK clients'
	// JSON encoders among them) hold megabytes after a load.
	runtime.GC()
	debug.FreeOSMemory()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return rss(), int64(s[0].Value.Uint64())
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
// goroutines, descriptors and registered actor processes are back to
// base's, the live heap within heapSlack of it and the RSS within
// rssSlack (not checked when rssSlack < 0); or until the deadline, when
// it returns the last reading and an error naming what did not return.
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
		cur.Processes = registered(srv.ActorSystem())
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
		case base != nil && cur.Processes > base.Processes:
			why = fmt.Sprintf("registered actor processes %d, idle %d", cur.Processes, base.Processes)
		default:
			// The RSS needs a full collection per reading: at most one
			// every half second.
			if time.Since(lastRSS) >= 500*time.Millisecond {
				cur.RSS, cur.HeapLive = freedRSS()
				lastRSS = time.Now()
			}
			switch {
			case base != nil && float64(cur.HeapLive) > float64(base.HeapLive)*(1+heapSlack):
				why = fmt.Sprintf("live heap %s, post-warm-up %s (+%.0f %% allowed)", mib(cur.HeapLive), mib(base.HeapLive), heapSlack*100)
			case base != nil && rssSlack >= 0 && float64(cur.RSS) > float64(base.RSS)*(1+rssSlack):
				why = fmt.Sprintf("RSS %s, post-warm-up %s (+%.0f %% allowed)", mib(cur.RSS), mib(base.RSS), rssSlack*100)
			default:
				return cur, time.Since(start), nil
			}
		}
		select {
		case <-ctx.Done():
			if cur.RSS == 0 {
				cur.RSS, cur.HeapLive = freedRSS()
			}
			return cur, time.Since(start), fmt.Errorf("soak: not idle after %v: %s", deadline, why)
		case <-time.After(pollInterval):
		}
	}
}

// heapSlack is how far above its post-warm-up value the live heap may be
// at the end. It is checked with and without the race detector: unlike
// the RSS, it holds only what the program still reaches.
const heapSlack = 0.10

// registered counts the processes in sys's registry.
func registered(sys *actor.ActorSystem) int {
	n := 0
	for _, m := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		n += m.Count()
	}
	return n
}

// fillRegistry adds and removes enough ids in sys's process registry to
// touch each of its maps (1,024 buckets of 32 shards) with near
// certainty. A Go map keeps the group its first entry allocated after
// the entry is gone, so the registry's heap grows with the number of
// maps the sessions' ids have landed in, to about 9 MiB (32,768 groups
// of 288 bytes), however many sessions ran: bounded, not leaked. Filled
// before the idle values are taken, it leaves what the load adds to be
// what the load leaked. 16 ids per map leave one untouched with a
// chance of about e^-16 each.
func fillRegistry(sys *actor.ActorSystem) {
	reg := sys.ProcessRegistry
	id := make([]byte, 0, 32)
	for i := range 16 * 1024 * 32 {
		id = strconv.AppendInt(append(id[:0], "soak-fill-"...), int64(i), 10)
		pid, _ := reg.Add(sys.DeadLetter, string(id))
		reg.Remove(pid)
	}
}

// mib formats bytes as MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
