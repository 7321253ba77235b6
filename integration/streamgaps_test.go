package integration_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// streamGaps starts n streamed chat completions of body on raw connections
// to addr (raw, so that the client costs little), waits until each has sent
// five frames, and returns gapsIn, which reports the gaps between
// consecutive frames of every stream whose later frame arrived in
// [from, to), as bench/ measures inter-token latency. The streams are
// closed when the test ends.
func streamGaps(t *testing.T, addr string, n int, body string) (gapsIn func(from, to time.Time) []time.Duration) {
	t.Helper()
	var (
		mu       sync.Mutex
		times    = make([][]time.Time, n)
		warm     sync.WaitGroup
		conns    = make([]net.Conn, n)
		finished sync.WaitGroup
	)
	warm.Add(n)
	finished.Add(n)
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		go func() {
			defer finished.Done()
			r := bufio.NewReaderSize(c, 64<<10)
			k := 0
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					if k < 5 {
						warm.Done()
					}
					return
				}
				if !bytes.HasPrefix(line, []byte("data: ")) {
					continue
				}
				now := time.Now()
				mu.Lock()
				times[i] = append(times[i], now)
				mu.Unlock()
				if k++; k == 5 {
					warm.Done()
				}
			}
		}()
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
		finished.Wait()
	})
	warm.Wait() // every stream runs
	return func(from, to time.Time) []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		var gaps []time.Duration
		for _, ts := range times {
			for j := 1; j < len(ts); j++ {
				if !ts[j].Before(from) && ts[j].Before(to) {
					gaps = append(gaps, ts[j].Sub(ts[j-1]))
				}
			}
		}
		return gaps
	}
}

// gapP99 is the 99th percentile of g (sorted in place).
func gapP99(g []time.Duration) time.Duration {
	slices.Sort(g)
	return g[len(g)*99/100]
}
