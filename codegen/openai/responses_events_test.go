package openai

import (
	"bytes"
	"testing"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// TestResponseAccumulatorMatchesFinal: folding every event but the last of
// each scripted stream (and folding it in pieces cut at every event) gives
// the final object's output items, text and arguments included; cut in the
// middle of an item, the open item holds its text so far.
func TestResponseAccumulatorMatchesFinal(t *testing.T) {
	for i := range respScripts {
		s := &respScripts[i]
		if s.err != nil {
			continue
		}
		meta := respTestMeta()
		raw := respRun(nil, s, NewResponsesFormatter(meta, codegen.FramingRaw))
		want := BuildResponse(&meta, &s.res).Output
		var a ResponseAccumulator
		for rest := raw; len(rest) > 0; {
			ev, next, ok := NextEvent(rest)
			if !ok {
				t.Fatalf("%s: a torn event at the end", s.name)
			}
			a.Fold(ev)
			rest = next
		}
		got := a.Output()
		if !a.Started || len(got) != len(want) {
			t.Fatalf("%s: %d items, want %d", s.name, len(got), len(want))
		}
		for j := range want {
			if g, w := appendItem(nil, &got[j]), appendItem(nil, &want[j]); !bytes.Equal(g, w) {
				t.Errorf("%s item %d:\n got %s\nwant %s", s.name, j, g, w)
			}
		}
	}

	// Cut after the first delta of a two-delta text: the message is open.
	s := &respScripts[0]
	f := NewResponsesFormatter(respTestMeta(), codegen.FramingRaw)
	raw := f.AppendStart(nil, &engine.Start{N: 1})
	raw = f.AppendDelta(raw, &s.deltas[0])
	var a ResponseAccumulator
	a.Fold(raw)
	out := a.Output()
	if len(out) != 1 || out[0].Type != "message" || out[0].Content[0].Text != "Hello" || out[0].Status != ResponseInProgress {
		t.Fatalf("open message %+v", out)
	}
	raw = f.AppendDelta(raw[:0], &s.deltas[1])
	a.Fold(raw)
	if got := a.Output()[0].Content[0].Text; got != "Hello, \"world\"\n<&>" {
		t.Fatalf("text so far %q", got)
	}
	if out[0].Content[0].Text != "Hello" {
		t.Fatal("Output's items share the accumulator's")
	}
}

// TestEventsAfter: the suffix after a sequence_number, from the start, at
// the end, and a log whose front was dropped.
func TestEventsAfter(t *testing.T) {
	raw := respRun(nil, &respScripts[0], NewResponsesFormatter(respTestMeta(), codegen.FramingRaw))
	last, _ := LastSequenceNumber(raw)
	f := func(events []byte, after, wantFirst int, wantOK bool) {
		t.Helper()
		rest, ok := EventsAfter(events, after)
		if ok != wantOK {
			t.Fatalf("after %d: ok %v", after, ok)
		}
		if !ok {
			return
		}
		n, has := FirstSequenceNumber(rest)
		if wantFirst < 0 {
			if has {
				t.Fatalf("after %d: events from %d, want none", after, n)
			}
			return
		}
		if !has || n != wantFirst || !bytes.HasSuffix(raw, rest) {
			t.Fatalf("after %d: first %d (%v), want %d", after, n, has, wantFirst)
		}
	}
	f(raw, -1, 0, true)
	f(raw, 0, 1, true)
	f(raw, 4, 5, true)
	f(raw, last-1, last, true)
	f(raw, last, -1, true)
	_, tail, _ := NextEvent(raw)
	_, tail, _ = NextEvent(tail) // events from 2 on
	f(tail, 0, 0, false)
	f(tail, 1, 2, true)
	f(tail, 3, 4, true)
}

// TestAppendTerminalEventCancelled: a cancelled response's stream ends
// with response.failed carrying the cancelled object, which openai-go
// decodes; EndsStream sees it, and not a text that looks like an event.
func TestAppendTerminalEventCancelled(t *testing.T) {
	meta := respTestMeta()
	f := NewResponsesFormatter(meta, codegen.FramingRaw)
	raw := f.AppendStart(nil, &engine.Start{N: 1})
	raw = f.AppendDelta(raw, &engine.Delta{Kind: engine.DeltaText, Text: []byte("x\n\nevent: response.completed\n"), TokenIDs: []int{1}})
	if EndsStream(raw) {
		t.Fatal("EndsStream on a delta")
	}
	res := &engine.Result{Err: &engine.Error{Kind: engine.KindAborted, Message: "aborted"},
		Choices: []engine.Choice{{Text: "x\n\nevent: response.completed\n", FinishReason: engine.FinishAbort}}}
	seq, _ := LastSequenceNumber(raw)
	raw = AppendTerminalEvent(raw, codegen.FramingRaw, seq+1, BuildResponse(&meta, res))
	if !EndsStream(raw) {
		t.Fatal("EndsStream missed the terminal event")
	}
	evs := respSDKEvents(t, raw)
	last := evs[len(evs)-1]
	if last.Type != "response.failed" || last.Response.Status != "cancelled" || last.SequenceNumber != int64(seq+1) ||
		last.Response.OutputText() != "x\n\nevent: response.completed\n" {
		t.Fatalf("terminal event %s", last.RawJSON())
	}
}
