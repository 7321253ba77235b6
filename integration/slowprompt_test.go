package integration_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/internal/eventually"
)

// gatedPrepare holds every Prepare of a big prompt (a body over 100 KB of
// text) at a gate until release closes, telling entered each time one
// reaches it; every other call goes straight to the engine.
type gatedPrepare struct {
	engine.Engine
	entered chan struct{}
	release chan struct{}
}

func (g gatedPrepare) Prepare(req *engine.Request) error {
	n := len(req.Prompt)
	for _, m := range req.Messages {
		n += len(m.Content)
	}
	if n > 100_000 {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.Engine.Prepare(req)
}

// TestSlowPromptDoesNotStallStreams: large prompts are prepared off the
// mailbox workers that forward every stream's frames. Four 100,000-token
// CJK prompts, as many as the session workers and more, are sent while 64
// streams run, and their Prepare is held inside the engine (the
// deterministic stand-in for a long tokenization: it stays busy as long
// as the test says); meanwhile every stream must keep receiving frames.
// Were the prompts prepared on the workers, the held Prepares would hold
// all of them and no stream would move. (It used to compare gap p99s with
// and without the prompts, which a loaded machine made flaky.) Once
// released, the real preparation runs and each big prompt answers 200.
func TestSlowPromptDoesNotStallStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of 64 streams")
	}
	const streams, itl = 64, 20 * time.Millisecond
	gate := gatedPrepare{entered: make(chan struct{}, 16), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(gate.release) }) }
	_, _, base := startServerWrapped(t, func(c *vajra.Config) {
		c.Sim.ITL = itl
		c.EngineConfig.MaxNumSeqs = streams + 8
		c.EngineConfig.MaxModelLen = 1 << 18
		c.EngineConfig.KVCacheTokens = 1 << 19
	}, func(e engine.Engine) engine.Engine { gate.Engine = e; return gate })
	t.Cleanup(release) // before the server's Stop, which waits for the held sessions
	addr := strings.TrimPrefix(base, "http://")

	var (
		frames   = make([]atomic.Int64, streams)
		warm     sync.WaitGroup
		conns    = make([]net.Conn, streams)
		finished sync.WaitGroup
	)
	warm.Add(streams)
	finished.Add(streams)
	body := `{"model":"vajra-sim","messages":[{"role":"user","content":"tell me a long story"}],"max_tokens":100000,"ignore_eos":true,"stream":true}`
	for i := range streams {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		go func() {
			defer finished.Done()
			r := bufio.NewReaderSize(c, 64<<10)
			n := 0
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					if n < 5 {
						warm.Done()
					}
					return
				}
				if !bytes.HasPrefix(line, []byte("data: ")) {
					continue
				}
				frames[i].Add(1)
				if n++; n == 5 {
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

	big := fmt.Sprintf(`{"model":"vajra-sim","messages":[{"role":"user","content":%q}],"max_tokens":1}`, strings.Repeat("中文字符测试", 200000/6))
	const bigPrompts = 4
	status := make(chan int, bigPrompts)
	for range bigPrompts {
		go func() {
			res, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(big))
			if err != nil {
				status <- 0
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			status <- res.StatusCode
		}()
	}
	// At least one big Prepare is held in the engine now.
	select {
	case <-gate.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("no big prompt reached Prepare")
	}
	// Every stream moves on by 5 frames while it is held (bounded: at the
	// engine's 20 ms per token that takes about 0.1 s).
	var from [streams]int64
	for i := range frames {
		from[i] = frames[i].Load()
	}
	for i := range frames {
		eventually.True(t, fmt.Sprintf("stream %d moves on while a big prompt's Prepare is held", i),
			func() bool { return frames[i].Load() >= from[i]+5 })
	}
	release()
	for range bigPrompts {
		if code := <-status; code != 200 {
			t.Fatalf("big prompt: status %d", code)
		}
	}
}
