package anthropic

import (
	"testing"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// FuzzDecodeMessagesRequest decodes arbitrary bodies: decoding and mapping
// must never panic, a mapped request always has messages, and a rejected one
// always names its parameter. Seeds live in testdata/fuzz.
func FuzzDecodeMessagesRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var r MessagesRequest
		if DecodeMessagesRequest(body, &r) != nil {
			return
		}
		var req engine.Request
		if err := r.ToEngine(&req); err != nil {
			if err.Param == "" || err.Status() != 400 {
				t.Fatalf("error without param: %+v", err)
			}
			return
		}
		if len(req.Messages) == 0 || req.Sampling.MaxTokens < 1 {
			t.Fatalf("accepted request without messages or max_tokens: %+v", req)
		}
		// Whatever was accepted can be answered.
		res := engine.Result{Choices: []engine.Choice{{Text: req.Messages[0].Content, FinishReason: engine.FinishStop}}}
		fm := NewStreamFormatter(StreamConfig{ID: "msg_f", Model: r.Model, Framing: codegen.FramingRaw})
		out := fm.AppendStart(nil, &engine.Start{})
		out = fm.AppendDelta(out, &engine.Delta{Kind: engine.DeltaText, Text: []byte(req.Messages[0].Content)})
		out = fm.AppendEnd(out, &res)
		_ = AppendMessage(out, "msg_f", r.Model, &res)
	})
}

// FuzzDecodeCountTokensRequest does the same for count_tokens bodies.
func FuzzDecodeCountTokensRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var r CountTokensRequest
		if DecodeCountTokensRequest(body, &r) != nil {
			return
		}
		var req engine.Request
		if err := r.ToEngine(&req); err != nil && err.Param == "" {
			t.Fatalf("error without param: %+v", err)
		}
	})
}
