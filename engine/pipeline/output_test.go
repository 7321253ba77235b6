package pipeline

import (
	"errors"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/text"
)

// bytes is a byte-level Vocab: ids 0..255 are bytes, 256 ends generation.
type bytesVocab struct{}

func (bytesVocab) VocabSize() int        { return 257 }
func (bytesVocab) EOG(id int32) bool     { return id == 256 }
func (bytesVocab) TokenKind(int32) uint8 { return text.TokenText }
func (bytesVocab) AppendText(dst []byte, id int32, _ bool) []byte {
	if id < 256 {
		return append(dst, byte(id))
	}
	return dst
}

// frames is a Formatter and Sink writing one letter per call.
type frames struct {
	out   []byte
	final *engine.Result
}

func (f *frames) Deliver(b []byte, res *engine.Result) {
	f.out = append(f.out, b...)
	if res != nil {
		f.final = res
	}
}
func (f *frames) AppendStart(dst []byte, _ *engine.Start) []byte { return append(dst, 'S') }
func (f *frames) AppendDelta(dst []byte, d *engine.Delta) []byte {
	return append(append(append(dst, '['), d.Text...), ']')
}
func (f *frames) AppendChoiceEnd(dst []byte, c *engine.ChoiceEnd) []byte {
	return append(dst, 'C')
}
func (f *frames) AppendEnd(dst []byte, _ *engine.Result) []byte  { return append(dst, 'E') }
func (f *frames) AppendError(dst []byte, _ *engine.Error) []byte { return append(dst, 'X') }

func newOut(t *testing.T, stop []string, interval int) (*Out, *frames) {
	t.Helper()
	f := &frames{}
	req := &engine.Request{Stream: true, Formatter: f, StreamInterval: interval}
	req.Sampling.Stop = stop
	o := &Out{}
	if err := o.Init(&Config{Request: req, Sink: f, Vocab: bytesVocab{}, Parse: text.Options{Stop: stop},
		PromptTokens: 3, MaxTokens: 100}); err != nil {
		t.Fatal(err)
	}
	return o, f
}

func feed(o *Out, s string) End {
	o.Step(time.Now())
	for i := 0; i < len(s); i++ {
		if end := o.Token(0, int32(s[i]), nil); end != Going {
			return end
		}
	}
	return Going
}

// TestStopStringAcrossTokens: a stop string split over tokens is held
// back, never streamed (its tokens get chunks with empty text, as vLLM
// streams them), and ends the choice as the engine's own stop.
func TestStopStringAcrossTokens(t *testing.T) {
	o, f := newOut(t, []string{"xyz"}, 1)
	if end := feed(o, "abxyzq"); end != Stopped {
		t.Fatalf("end %v, want Stopped", end)
	}
	o.Deliver()
	frames, res := o.Finish(Done, nil)
	o.DeliverFinal(frames, res)
	if got := string(f.out); got != "S[a][b][][]CE" {
		t.Fatalf("frames %q", got)
	}
	c := res.Choices[0]
	if c.Text != "ab" || c.StopString != "xyz" || c.FinishReason != engine.FinishStop || res.Usage.CompletionTokens != 5 {
		t.Fatalf("choice %+v usage %+v", c, res.Usage)
	}
}

// TestEndCauses: the client's abort writes nothing more (by its cause,
// not its message) and its Result is KindAborted; a failure appends its error event
// after them (it never overwrites them); success ends with the end frame.
func TestEndCauses(t *testing.T) {
	for _, tc := range []struct {
		cause Cause
		err   *engine.Error
		want  string
		kind  engine.ErrorKind
	}{
		{Done, nil, "S[a][b]CE", 0},
		// The client is gone: not even the step's pending frames go out.
		{Aborted, nil, "", engine.KindAborted},
		{Failed, &engine.Error{Kind: engine.KindClosed, Message: "gone"}, "S[a][b]X", engine.KindClosed},
	} {
		o, f := newOut(t, nil, 1)
		feed(o, "ab")
		if tc.cause == Done {
			o.EndChoice(0, engine.FinishStop, -1)
		}
		frames, res := o.Finish(tc.cause, tc.err)
		o.DeliverFinal(frames, res)
		if string(f.out) != tc.want {
			t.Fatalf("cause %d: frames %q, want %q", tc.cause, f.out, tc.want)
		}
		if tc.kind == 0 && res.Err != nil || tc.kind != 0 && (res.Err == nil || res.Err.Kind != tc.kind) {
			t.Fatalf("cause %d: err %v", tc.cause, res.Err)
		}
		if tc.cause == Aborted && !errors.Is(res.Err, engine.ErrAborted) {
			t.Fatalf("abort error %v is not engine.ErrAborted", res.Err)
		}
		if again, res2 := o.Finish(Done, nil); again != nil || res2 != nil {
			t.Fatal("a second Finish built another Result")
		}
	}
}

// TestStreamInterval: text is held until the interval's tokens are due,
// and what is held is flushed when the choice ends.
func TestStreamInterval(t *testing.T) {
	o, f := newOut(t, nil, 3)
	feed(o, "abcdefg")
	o.EndChoice(0, engine.FinishLength, -1)
	o.Deliver()
	if got := string(f.out); got != "S[abc][def][g]C" {
		t.Fatalf("frames %q", got)
	}
}

// TestTokensWithoutText: a token whose text is not out yet (here half of
// a UTF-8 character) gets a chunk with empty text, one per token or per
// stream interval, unless a tool-call or reasoning parser reads the
// output (vLLM's parsers hold such tokens back too).
func TestTokensWithoutText(t *testing.T) {
	for _, tc := range []struct {
		interval int
		parse    text.Options
		in, want string
	}{
		{1, text.Options{}, "aé€", "S[a][][é][][][€]C"},
		{2, text.Options{}, "aé€", "S[a][é][€]C"},
		{2, text.Options{}, "€€", "S[][€][€]C"},
		{1, text.Options{Tools: "hermes"}, "aé€", "S[a][é][€]C"},
		{1, text.Options{Tools: "hermes", ToolsOff: true}, "aé€", "S[a][][é][][][€]C"},
		{1, text.Options{Reasoning: "qwen3"}, "aé€", "S[a][é][€]C"},
	} {
		f := &frames{}
		req := &engine.Request{Stream: true, Formatter: f, StreamInterval: tc.interval}
		o := &Out{}
		if err := o.Init(&Config{Request: req, Sink: f, Vocab: bytesVocab{}, Parse: tc.parse, PromptTokens: 3, MaxTokens: 100}); err != nil {
			t.Fatal(err)
		}
		feed(o, tc.in)
		o.EndChoice(0, engine.FinishLength, -1)
		o.Deliver()
		if got := string(f.out); got != tc.want {
			t.Errorf("%q, interval %d, parse %+v: frames %q, want %q", tc.in, tc.interval, tc.parse, got, tc.want)
		}
	}
}

// TestPanicBreaks: after Break the Result is panicked and no frame of the
// request's own code is written again.
func TestPanicBreaks(t *testing.T) {
	o, f := newOut(t, nil, 1)
	feed(o, "ab")
	o.Break("boom")
	frames, res := o.Finish(Failed, engine.PanicError())
	o.DeliverFinal(frames, res)
	if len(f.out) != 0 || !res.Panicked || res.Err == nil || string(intsToBytes(res.Choices[0].TokenIDs)) != "ab" {
		t.Fatalf("frames %q, result %+v", f.out, res)
	}
}

func intsToBytes(ids []int) []byte {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return b
}
