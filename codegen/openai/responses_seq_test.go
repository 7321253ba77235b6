package openai

import (
	"bytes"
	"testing"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// What a session needs to end a Responses stream itself, whoever wrote the
// events before: where the stream stopped (LastSequenceNumber) and the
// terminal event at the next number (AppendResponseFailed).

func TestLastSequenceNumber(t *testing.T) {
	f := func(frames string, want int, wantOK bool) {
		t.Helper()
		got, ok := LastSequenceNumber([]byte(frames))
		if got != want || ok != wantOK {
			t.Errorf("LastSequenceNumber(%q) = %d, %v; want %d, %v", frames, got, ok, want, wantOK)
		}
	}
	f("", 0, false)
	f("data: [DONE]\n\n", 0, false)
	f(`event: a`+"\n"+`data: {"type":"a","sequence_number":0}`+"\n\n", 0, true)
	f(`data: {"sequence_number":3}`+"\n\n"+`data: {"sequence_number":41}`+"\n\n", 41, true)
	// Chunk-framed, as the session forwards them.
	f("1c\r\ndata: {\"sequence_number\":17}\n\n\r\n", 17, true)
	// Another writer's spacing and member order.
	f(`data: {"sequence_number": 9,"response":{"id":"resp_1","output":[]}}`+"\n\n", 9, true)
	// Text that mentions the member is escaped inside its JSON string.
	f(`data: {"delta":"\"sequence_number\":99","sequence_number":5}`+"\n\n", 5, true)
	f(`data: {"sequence_number":}`, 0, false)
}

// TestAppendResponseFailedIsTheFormattersError: the session's error event
// and the formatter's are the same bytes at the same number, and the
// formatter's own stream gives LastSequenceNumber the number before it.
func TestAppendResponseFailedIsTheFormattersError(t *testing.T) {
	meta := respTestMeta()
	err := &engine.Error{Kind: engine.KindInternal, Message: "The session failed; see the server log."}
	for _, framing := range []codegen.Framing{codegen.FramingChunked, codegen.FramingRaw} {
		f := NewResponsesFormatter(meta, framing)
		f.SetSequence(5)
		stream := f.AppendStart(nil, &engine.Start{PromptTokens: 3, N: 1})
		d := respDelta(engine.DeltaText, "Hi")
		stream = f.AppendDelta(stream, &d)
		last, ok := LastSequenceNumber(stream)
		if !ok || last != 5+4 { // created 5, in_progress, item added, part added, delta 9
			t.Fatalf("framing %d: last sequence_number %d, %v; want 9", framing, last, ok)
		}
		want := f.AppendError(nil, err)
		got := AppendResponseFailed(nil, &meta, framing, last+1, err)
		if !bytes.Equal(got, want) {
			t.Fatalf("framing %d:\n%q\n%q", framing, got, want)
		}
	}
}
