package actors

import (
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
)

// TestBackgroundLogBound: past its bound the event log drops its oldest
// half at an event boundary, its first kept sequence_number follows, a
// resume from before it is refused, and the output so far (folded before
// the drop) stays whole.
func TestBackgroundLogBound(t *testing.T) {
	meta := openai.ResponseMeta{ID: "resp_bound", Model: "m"}
	f := openai.NewResponsesFormatter(meta, codegen.FramingRaw)
	b := &background{maxLog: 4 << 10}
	b.appendLog(f.AppendStart(nil, &engine.Start{N: 1}))
	var want strings.Builder
	var batch []byte
	for i := range 200 {
		tok := "tok" + string(rune('a'+i%26)) + " "
		want.WriteString(tok)
		batch = f.AppendDelta(batch[:0], &engine.Delta{Kind: engine.DeltaText, Text: []byte(tok), TokenIDs: []int{1}})
		b.appendLog(batch)
		if len(b.log) > b.maxLog {
			t.Fatalf("log %d bytes over its bound %d", len(b.log), b.maxLog)
		}
	}
	first, ok := openai.FirstSequenceNumber(b.log)
	if !ok || first != b.firstSeq || first == 0 {
		t.Fatalf("first kept %d (%v), firstSeq %d", first, ok, b.firstSeq)
	}
	if _, ok := openai.EventsAfter(b.log, first-2); ok {
		t.Fatal("a resume from before the first kept event was accepted")
	}
	if rest, ok := openai.EventsAfter(b.log, first-1); !ok || len(rest) != len(b.log) {
		t.Fatal("a resume from the first kept event was refused")
	}
	if ae := eventsGone(first-2, first); ae.Status != 400 || ae.Param != "starting_after" {
		t.Fatalf("refusal %+v", ae)
	}
	b.acc.Fold(b.log[b.folded:])
	out := b.acc.Output()
	if len(out) != 1 || out[0].Content[0].Text != want.String() {
		t.Fatalf("output so far after drops: %+v", out)
	}
}

// progressCatcher keeps every storeProgress it is sent and the record it
// carried when it arrived.
type progressCatcher struct{ got chan [2]any }

func (c *progressCatcher) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*storeProgress); ok {
		c.got <- [2]any{m, m.rec}
	}
}

// TestBackgroundProgressMessagesAreNotReused: each progress write to a
// shared store is a message of its own. It used to be one field of the
// session, rewritten for the next second's snapshot while the store's
// goroutine could still be reading the last one.
func TestBackgroundProgressMessagesAreNotReused(t *testing.T) {
	system := NewActorSystem(zap.NewNop())
	defer system.Shutdown()
	c := &progressCatcher{got: make(chan [2]any, 4)}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return c }))
	ss := &session{}
	ss.owner = &Sessions{store: &ResponseStore{root: system.Root, pid: pid}}
	d := &responsesDialect{id: "resp_p", meta: openai.ResponseMeta{ID: "resp_p", Model: "m"}}
	b := &background{d: d, shared: true}
	b.live.rec = &storedResponse{id: d.id}
	var msgs []*storeProgress
	var recs []*storedResponse
	for range 2 {
		b.progressAt = time.Now().Add(-2 * progressEvery)
		b.shareProgress(ss)
		select {
		case m := <-c.got:
			msgs, recs = append(msgs, m[0].(*storeProgress)), append(recs, m[1].(*storedResponse))
		case <-time.After(5 * time.Second):
			t.Fatal("no progress message")
		}
	}
	if msgs[0] == msgs[1] {
		t.Fatal("the second progress write reused the first one's message")
	}
	if msgs[0].rec != recs[0] {
		t.Fatal("the first progress message was rewritten after it was sent")
	}
}
