package actors

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/sim"
)

// gatePrepEngine holds Engine.Prepare of a large prompt (offPoolBody bytes
// of text or more) until gate closes, and says so on entered.
type gatePrepEngine struct {
	*sim.Engine
	entered chan struct{}
	gate    chan struct{}
}

func (e *gatePrepEngine) Prepare(req *engine.Request) error {
	if promptBytes(req.Messages) >= offPoolBody {
		select { // once per gate: the truncation loop prepares again
		case e.entered <- struct{}{}:
		default:
		}
		<-e.gate
	}
	return e.Engine.Prepare(req)
}

// TestRealtimeLargePromptOffTheWorkers: a Realtime response whose prompt
// is large is prepared (with its truncation loop) on the prepare pool, not
// on the mailbox workers. With one mailbox worker and the large prompt's
// Prepare held, another connection's response runs to its end and the
// connection whose prompt is held still answers its client; released, the
// response runs. (Prepared on the worker, the held Prepare would hold the
// only worker and nothing else could run.) A response.cancel while its
// prompt is prepared ends it cancelled, without starting it.
func TestRealtimeLargePromptOffTheWorkers(t *testing.T) {
	_, eng := rtServer(t, 0)
	ge := &gatePrepEngine{Engine: eng, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	s, err := NewSessions(Config{Engine: ge, Models: []string{"vajra-sim"}, Logger: zap.NewNop(), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	released := false
	release := func() {
		if !released {
			released = true
			close(ge.gate)
		}
	}
	t.Cleanup(release)
	held := func() {
		t.Helper()
		select {
		case <-ge.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the large prompt was never prepared")
		}
	}

	big, bh := rtDial(t, s, "model=vajra-sim", false)
	defer bh.ConnClosed()
	big.waitFor(0, "session.created")
	// A conversation of 40 items, 40 KiB of text: more than the context,
	// so that the truncation loop runs too.
	item := strings.Repeat("The sea is wide and deep. ", 40)
	for i := range 40 {
		bh.Message([]byte(`{"type":"conversation.item.create","item":{"id":"i` + strconv.Itoa(i) + `","type":"message","role":"user","content":[{"type":"input_text","text":"` + item + `"}]}}`))
	}
	big.waitFor(0, "conversation.item.done")
	for big.count() < 1+40*2 {
		big.waitFor(big.count()-1, "conversation.item.done")
	}
	ran := s.prep.ran.Load()
	n := big.count()
	bh.Message([]byte(`{"type":"response.create","event_id":"big"}`))
	held()

	// Another connection's response runs while the prompt is held.
	small, sh := rtDial(t, s, "model=vajra-sim", false)
	defer sh.ConnClosed()
	small.waitFor(0, "session.created")
	sh.Message([]byte(`{"type":"response.create","response":{"max_output_tokens":4}}`))
	if d := small.waitFor(1, "response.done"); d[len(d)-1].Response.Status == "failed" {
		t.Fatalf("small response: %s", d[len(d)-1].raw)
	}
	// The held connection answers its client: an item, and a refusal
	// of a second response while the first is being created.
	bh.Message([]byte(`{"type":"conversation.item.retrieve","item_id":"i0"}`))
	big.waitFor(n, "conversation.item.retrieved")
	bh.Message([]byte(`{"type":"response.create","event_id":"second"}`))
	if e := big.waitFor(n, "error"); e[len(e)-1].Error.Code != "conversation_already_has_active_response" {
		t.Fatalf("second response.create: %s", e[len(e)-1].raw)
	}

	release()
	evs := big.waitFor(n, "response.done")
	if d := evs[len(evs)-1]; d.Response.Status != "completed" && d.Response.Status != "incomplete" {
		t.Fatalf("large response: %s", d.raw)
	}
	if got := s.prep.ran.Load(); got != ran+1 {
		t.Fatalf("the prepare pool prepared %d requests, want 1", got-ran)
	}

	// Cancelled while prepared: response.done cancelled, no engine work.
	select { // the truncation loop's later entries
	case <-ge.entered:
	default:
	}
	ge.gate = make(chan struct{})
	released = false
	n = big.count()
	bh.Message([]byte(`{"type":"response.create","event_id":"third"}`))
	held()
	bh.Message([]byte(`{"type":"response.cancel"}`))
	release()
	evs = big.waitFor(n, "response.done")
	if d := evs[len(evs)-1]; d.Response.Status != "cancelled" || types(evs)[0] != "response.created" {
		t.Fatalf("response cancelled while prepared: %v %s", types(evs), d.raw)
	}
}

// TestRealtimeTruncationEstimate: the truncation loop's first cut leaves
// out the oldest messages after the instructions until the rest fits the
// context, by each message's tokens plus messageOverhead (wordEngine: a
// token per byte), keeps the last message, and cuts nothing when the
// context length is unknown or everything fits.
func TestRealtimeTruncationEstimate(t *testing.T) {
	msg := func(n int) engine.Message { return engine.Message{Role: "user", Content: strings.Repeat("x", n)} }
	f := func(maxModelLen, maxTokens, last, want int) {
		t.Helper()
		rs := new(realtimeSession)
		rs.owner = &Sessions{cfg: Config{Engine: &wordEngine{}, MaxModelLen: maxModelLen}}
		r := &engine.Request{Messages: []engine.Message{{Role: "system", Content: "ab"}}, Sampling: engine.Sampling{MaxTokens: maxTokens}}
		for range 9 {
			r.Messages = append(r.Messages, msg(10))
		}
		r.Messages = append(r.Messages, msg(last))
		if got := rs.overflow(r, 1); got != want {
			t.Errorf("context %d, max_tokens %d, last message %d bytes: %d left out, want %d", maxModelLen, maxTokens, last, got, want)
		}
	}
	f(100, 0, 10, 5)  // 90 tokens after the instructions: five 18-token messages
	f(100, 20, 10, 7) // 70: three
	f(1000, 0, 10, 0) // everything fits
	f(0, 0, 10, 0)    // context unknown
	f(100, 0, 500, 9) // the last message alone does not fit: it stays
}
