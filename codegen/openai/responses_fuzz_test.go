package openai

import (
	"bytes"
	"testing"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// FuzzDecodeResponsesRequest decodes arbitrary bodies: decoding, mapping,
// building and streaming a response for what was accepted must never
// panic, and every rejection names a code. Seeds live in testdata/fuzz.
func FuzzDecodeResponsesRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":"hi"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var r ResponsesRequest
		if DecodeResponsesRequest(body, &r) != nil {
			return
		}
		var req engine.Request
		if err := r.ToEngine(&req, nil); err != nil {
			if err.Code == "" {
				t.Fatalf("error without code: %+v", err)
			}
			return
		}
		if len(req.Messages) == 0 {
			t.Fatalf("accepted a request without messages")
		}
		meta := r.Meta("resp_fuzz", 1)
		_ = r.InputItems(meta.ID)
		res := engine.Result{Choices: []engine.Choice{{Text: req.Messages[0].Content, FinishReason: engine.FinishStop}}}
		fm := NewResponsesFormatter(meta, codegen.FramingRaw)
		out := fm.AppendStart(nil, &engine.Start{})
		out = fm.AppendDelta(out, &engine.Delta{Kind: engine.DeltaText, Text: []byte(req.Messages[0].Content)})
		out = fm.AppendEnd(out, &res)
		_ = AppendResponse(out, BuildResponse(&meta, &res))
	})
}

// FuzzResponseEvents reads arbitrary bytes as a logged Responses stream
// (what a self-formatting engine could hand over): folding, resuming and
// the terminal check must never panic, the output must render, and a
// resume is always a suffix of the log.
func FuzzResponseEvents(f *testing.F) {
	for i := range respScripts {
		f.Add(respRun(nil, &respScripts[i], NewResponsesFormatter(respTestMeta(), codegen.FramingRaw)), 3)
	}
	f.Add([]byte("event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"message\"}}\n\n"+
		"event: x\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"\\u00e9\"}\n\n"), -1)
	f.Fuzz(func(t *testing.T, events []byte, after int) {
		var a ResponseAccumulator
		a.Fold(events)
		meta := respTestMeta()
		_ = AppendResponse(nil, BuildPartialResponse(&meta, ResponseInProgress, a.Output()))
		if rest, ok := EventsAfter(events, after); ok && len(rest) > 0 && !bytes.HasSuffix(events, rest) {
			t.Fatalf("EventsAfter(%d) is not a suffix", after)
		}
		_ = EndsStream(events)
		_, _ = FirstSequenceNumber(events)
	})
}
