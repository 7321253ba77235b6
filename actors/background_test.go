package actors

import (
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/store"
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

// progressStore keeps every record it is given as progress, with a copy
// of its body as it was then; the sessions' other store calls are not
// made here (the embedded nil Store would panic).
type progressStore struct {
	store.Store
	got chan [2]any
}

func (c *progressStore) Progress(rec *store.Record) {
	c.got <- [2]any{rec, string(rec.Body)}
}

// TestBackgroundProgressMessagesAreNotReused: each progress write to a
// shared store is a record of its own. It used to be one field of the
// session, rewritten for the next second's snapshot while the store's
// goroutine could still be reading the last one.
func TestBackgroundProgressMessagesAreNotReused(t *testing.T) {
	c := &progressStore{got: make(chan [2]any, 4)}
	ss := &session{}
	ss.owner = &Sessions{store: c}
	d := &responsesDialect{id: "resp_p", meta: openai.ResponseMeta{ID: "resp_p", Model: "m"}}
	b := &background{d: d, shared: true}
	b.live.Rec = &store.Record{ID: d.id}
	var recs []*store.Record
	var bodies []string
	for i := range 2 {
		if i == 1 { // output since the first write: the second snapshot differs
			b.appendLog([]byte("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}\n\n"))
		}
		b.progressAt = time.Now().Add(-2 * progressEvery)
		b.shareProgress(ss)
		select {
		case m := <-c.got:
			recs, bodies = append(recs, m[0].(*store.Record)), append(bodies, m[1].(string))
		case <-time.After(5 * time.Second):
			t.Fatal("no progress write")
		}
	}
	if recs[0] == recs[1] {
		t.Fatal("the second progress write reused the first one's record")
	}
	if string(recs[0].Body) != bodies[0] {
		t.Fatal("the first progress record was rewritten after it was sent")
	}
}
