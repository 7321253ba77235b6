package openai

import (
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
