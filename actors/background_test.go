package actors

import (
	"strings"
	"testing"

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
