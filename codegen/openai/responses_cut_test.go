package openai

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// TestCutTerminalEvent: in every framing, the terminal event of a stream's
// last frames is cut (with the chunked body's last-chunk), the events
// before it are kept byte for byte, and its sequence_number is returned;
// frames that end with another event are left alone.
func TestCutTerminalEvent(t *testing.T) {
	meta := &ResponseMeta{ID: "resp_x", Model: "m"}
	for _, f := range []codegen.Framing{codegen.FramingChunked, codegen.FramingRaw, codegen.FramingWebSocket} {
		var frames []byte
		for i := range 3 {
			var mark int
			frames, mark = codegen.BeginEvent(frames, f, "response.output_text.delta")
			frames = append(frames, `,"delta":"`+strings.Repeat("x", 60*i)+`"`...)
			frames = endEvent(frames, f, mark, i+4)
		}
		prefix := bytes.Clone(frames)
		if _, _, ok := CutTerminalEvent(prefix, f); ok {
			t.Fatalf("framing %d: cut a delta event", f)
		}
		frames = AppendResponseFailed(frames, meta, f, 7, &engine.Error{Kind: engine.KindInternal, Message: "boom"})
		rest, seq, ok := CutTerminalEvent(frames, f)
		if !ok || seq != 7 || !bytes.Equal(rest, prefix) {
			t.Fatalf("framing %d: ok %v seq %d\nrest %q\nwant %q", f, ok, seq, rest, prefix)
		}
		out := AppendResponseFailedCode(rest, meta, f, seq, "response_store_unavailable", "not stored")
		if !bytes.Contains(out, []byte(`"code":"response_store_unavailable"`)) || !bytes.Contains(out, []byte(`"status":"failed"`)) {
			t.Fatalf("framing %d: %q", f, out)
		}
		if n, _ := LastSequenceNumber(out); n != 7 {
			t.Fatalf("framing %d: the replacement is numbered %d", f, n)
		}
	}
}
