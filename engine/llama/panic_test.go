package llama

import (
	"errors"
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// panicRecorder is a recorder that panics in one of its methods ("start",
// "delta", "choice_end", "end" of the Formatter, "sink" for a delivery
// that is not the final one) at its nth call.
type panicRecorder struct {
	*recorder
	at         string
	nth, calls int
	frames     []byte
}

func (p *panicRecorder) maybe(method string) {
	if method == p.at {
		if p.calls++; p.calls == p.nth {
			panic("exploded in " + method)
		}
	}
}

func (p *panicRecorder) AppendStart(dst []byte, s *engine.Start) []byte {
	p.maybe("start")
	return p.recorder.AppendStart(dst, s)
}

func (p *panicRecorder) AppendDelta(dst []byte, d *engine.Delta) []byte {
	p.maybe("delta")
	return p.recorder.AppendDelta(dst, d)
}

func (p *panicRecorder) AppendChoiceEnd(dst []byte, e *engine.ChoiceEnd) []byte {
	p.maybe("choice_end")
	return p.recorder.AppendChoiceEnd(dst, e)
}

func (p *panicRecorder) AppendEnd(dst []byte, res *engine.Result) []byte {
	p.maybe("end")
	return p.recorder.AppendEnd(dst, res)
}

func (p *panicRecorder) Deliver(frames []byte, final *engine.Result) {
	if final == nil {
		p.maybe("sink")
	}
	p.frames = append(p.frames, frames...)
	p.recorder.Deliver(frames, final)
}

// TestOwnCodePanicEndsOnlyItsRequest: a panic in a request's Formatter
// (each method) or its Sink ends that request alone, with a final Result
// of KindInternal marked Panicked and no frame after the panic; its
// sequences are freed, and the streams beside it (two choices each, so
// shared prompts are freed too) end normally.
func TestOwnCodePanicEndsOnlyItsRequest(t *testing.T) {
	e := newTestEngine(t, Config{Config: engine.Config{MaxModelLen: 512, MaxNumSeqs: 16}, PrefixCaching: true}, tinymodel.Config{})
	for _, where := range []string{"start", "delta", "choice_end", "end", "sink"} {
		t.Run(where, func(t *testing.T) {
			const others = 4
			recs := make([]*recorder, others)
			for i := range recs {
				req := chatReq("Stream "+where+" number "+string(rune('a'+i)), 12)
				req.Sampling.IgnoreEOS, req.Sampling.N = true, 2
				req.Stream = true
				recs[i] = newRecorder()
				req.Formatter = recs[i]
				if err := e.Prepare(req); err != nil {
					t.Fatal(err)
				}
				if _, err := e.Start(req, recs[i]); err != nil {
					t.Fatal(err)
				}
			}
			p := &panicRecorder{recorder: newRecorder(), at: where, nth: 3}
			if where == "start" || where == "end" || where == "choice_end" {
				p.nth = 1
			}
			req := chatReq("The one that fails at "+where, 12)
			req.Sampling.IgnoreEOS, req.Sampling.N = true, 2
			req.Stream, req.Formatter = true, p
			if err := e.Prepare(req); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Start(req, p); err != nil {
				t.Fatal(err)
			}
			<-p.done
			if res := p.res; !res.Panicked || !errors.Is(res.Err, engine.ErrInternal) {
				t.Fatalf("failed request's Result: Panicked %v, Err %v; want a panicked KindInternal", res.Panicked, res.Err)
			}
			for _, b := range p.frames {
				if b == 'e' || b == 'x' {
					t.Fatalf("frames after the panic: %q", p.frames)
				}
			}
			for i, r := range recs {
				<-r.done
				if r.res.Err != nil || r.res.Panicked || r.res.Usage.CompletionTokens != 24 {
					t.Fatalf("stream %d beside the panic: err %v, usage %+v", i, r.res.Err, r.res.Usage)
				}
			}
			if res, _ := run(t, e, chatReq("after", 4)); res.Err != nil {
				t.Fatalf("request after the panic: %v", res.Err)
			}
			if st := e.Stats(); st.Running != 0 || st.Waiting != 0 {
				t.Fatalf("engine after the panic: %+v", st)
			}
		})
	}
}
