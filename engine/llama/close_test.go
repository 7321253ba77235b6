package llama

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/internal/eventually"
)

// TestEntryPointsRaceClose calls every entry point of the engine from
// several goroutines while Close runs, many times: none may reach the
// freed context or model (a SIGSEGV in C, or a race the detector sees),
// each call made after Close fails cleanly with KindClosed, and every
// session started gets its final Result.
func TestEntryPointsRaceClose(t *testing.T) {
	lib := needLib(t)
	path, err := tinymodel.TempFile(t.TempDir(), tinymodel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	for round := range rounds {
		e, err := New(Config{Config: engine.Config{MaxNumSeqs: 4}, LibDir: lib, ModelPath: path, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg      sync.WaitGroup
			stop    atomic.Bool
			started sync.WaitGroup
			results sync.WaitGroup // one per session started
		)
		fail := func(format string, args ...any) { t.Errorf("round %d: "+format, append([]any{round}, args...)...) }
		closedOK := func(what string, err error) {
			var ee *engine.Error
			if !errors.As(err, &ee) || (ee.Kind != engine.KindClosed && ee.Kind != engine.KindOverloaded) {
				fail("%s after Close: %v, want a closed error", what, err)
			}
		}
		loop := func(body func(closed bool)) {
			wg.Add(1)
			started.Add(1)
			go func() {
				defer wg.Done()
				once := false
				// Run until a few calls after Close returned.
				for after := 0; after < 3; {
					if !once {
						once = true
						started.Done()
					}
					closed := stop.Load()
					body(closed)
					if closed {
						after++
					}
				}
			}()
		}
		loop(func(bool) { _ = e.Stats() })
		loop(func(bool) { _ = e.Detokenize([]int{1, 2, 3}) })
		loop(func(closed bool) {
			if toks := e.Tokenize("hello there"); closed && toks != nil {
				fail("Tokenize after Close returned %v", toks)
			}
		})
		loop(func(closed bool) {
			req := chatReq("Prepare me, then start me.", 4)
			err := e.Prepare(req)
			if closed {
				closedOK("Prepare", err)
				return
			}
			if err != nil {
				closedOK("Prepare", err)
			}
		})
		for range 2 {
			loop(func(closed bool) {
				req := chatReq("A stream that Close may cut short.", 16)
				req.Stream, req.Sampling.IgnoreEOS = true, true
				r := newRecorder()
				req.Formatter = r
				// Start prepares it itself: the sampler build races Close.
				sess, err := e.Start(req, r)
				if err != nil {
					closedOK("Start", err)
					return
				}
				if closed {
					fail("Start after Close admitted a session")
				}
				results.Add(1)
				go func() {
					defer results.Done()
					select {
					case <-r.done:
					case <-time.After(30 * time.Second):
						fail("a session never got its final result")
					}
				}()
				_ = sess
			})
		}
		started.Wait()
		// Let some work begin (the figure the engine publishes, not a guess
		// at timing), bounded: Close must be safe at any point anyway.
		eventually.True(t, "some work begins", func() bool { return e.Stats().GenerationTokens > 0 })
		var closers sync.WaitGroup
		for range 2 {
			closers.Add(1)
			go func() { defer closers.Done(); e.Close() }()
		}
		closers.Wait()
		stop.Store(true)
		wg.Wait()
		results.Wait()
		if st := e.Stats(); st.Healthy {
			t.Fatalf("round %d: healthy after Close: %+v", round, st)
		}
		if t.Failed() {
			return
		}
	}
}
