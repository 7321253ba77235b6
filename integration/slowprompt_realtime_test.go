package integration_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra"
)

// TestRealtimeLargeConversationDoesNotStallStreams: while as many Realtime
// connections as there are session workers each prepare a response over a conversation of 2,000 items
// (100,000 CJK characters, the tokenizer's slow path) that does not fit
// the context, so that the truncation loop renders and tokenizes it again
// and again, 100 running HTTP streams keep their inter-token gaps: the
// p99 of the gaps that end while the responses are prepared stays within
// 5 ms or 2x of the p99 in a window of the same run without them, as
// TestSlowPromptDoesNotStallStreams checks for HTTP's large prompts. (The
// deterministic check that the preparation runs on the prepare pool is
// actors' TestRealtimeLargePromptOffTheWorkers.)
func TestRealtimeLargeConversationDoesNotStallStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of 100 streams")
	}
	if raceEnabled {
		t.Skip("timing: run by make test's pass without -race")
	}
	const streams, itl, items = 100, 50 * time.Millisecond, 2000
	_, _, base := startServer(t, func(c *vajra.Config) {
		c.Sim.ITL = itl
		c.EngineConfig.MaxNumSeqs = streams + 8
		c.EngineConfig.MaxModelLen = 1 << 14
	})
	addr := strings.TrimPrefix(base, "http://")

	// The conversations, built before the streams start.
	built := time.Now()
	// Each item's text is its own (the engine's prompt cache would serve
	// repeated turns): 50 CJK characters from a 12-character cycle,
	// rotated by the item's index, then the index.
	cycle := []rune(strings.Repeat("中文字符测试汉语言大模型", 6))
	text := func(j int) string { return string(cycle[j%12:j%12+50]) + fmt.Sprint(j) }
	// As many connections as there are session workers (GOMAXPROCS), so
	// that preparing them on the workers that forward frames would hold
	// every one of them.
	conns := make([]*rawRT, max(2, runtime.GOMAXPROCS(0)))
	for i := range conns {
		r := rawRealtime(t, base, "model=vajra-sim", false)
		r.until("session.created")
		for j := range items {
			r.send(fmt.Sprintf(`{"type":"conversation.item.create","item":{"id":"i%d","type":"message","role":"user","content":[{"type":"input_text","text":%q}]}}`, j, text(j)))
		}
		for range items {
			r.until("conversation.item.done")
		}
		conns[i] = r
	}
	t.Logf("%d conversations of %d items built in %v", len(conns), items, time.Since(built))

	body := `{"model":"vajra-sim","messages":[{"role":"user","content":"tell me a long story"}],"max_tokens":4000,"ignore_eos":true,"stream":true}`
	gapsIn := streamGaps(t, addr, streams, body)

	start := time.Now()
	for _, r := range conns {
		r.send(`{"type":"response.create","response":{"max_output_tokens":1}}`)
	}
	for _, r := range conns {
		evs := r.until("response.done")
		var done struct {
			Response struct {
				Status string
				Usage  struct {
					InputTokens int `json:"input_tokens"`
				}
			}
		}
		if err := json.Unmarshal(evs[len(evs)-1], &done); err != nil || done.Response.Status == "failed" {
			t.Fatalf("large response: %s", evs[len(evs)-1])
		}
		if in := done.Response.Usage.InputTokens; in == 0 || in > 1<<14 {
			t.Fatalf("the truncated prompt has %d tokens", in)
		}
	}
	end := time.Now()
	// A window of the same length right after it, without the large
	// conversations. (Waiting for the window's end is the measurement.)
	time.Sleep(end.Sub(start))
	baseEnd := time.Now()

	during, without := gapsIn(start, end), gapsIn(end, baseEnd)
	if len(during) < streams || len(without) < streams {
		t.Fatalf("too few gaps measured: %d during, %d without", len(during), len(without))
	}
	pd, pw := gapP99(during), gapP99(without)
	t.Logf("large conversations prepared in %v; gap p99 %v while they were (%d gaps), %v without (%d gaps); engine ITL %v",
		end.Sub(start), pd, len(during), pw, len(without), itl)
	if pd > pw+5*time.Millisecond && pd > 2*pw {
		t.Fatalf("gap p99 %v while large Realtime conversations were prepared, %v without: more than 5 ms and 2x worse", pd, pw)
	}
}
