package sim

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// panicFormatter is a recFormatter that panics in one method, at its
// nth call (counted from 1).
type panicFormatter struct {
	recFormatter
	at    string
	nth   int
	calls int
}

func (f *panicFormatter) maybe(method string) {
	if method == f.at {
		if f.calls++; f.calls == f.nth {
			panic("formatter exploded in " + method)
		}
	}
}

func (f *panicFormatter) AppendStart(dst []byte, s *engine.Start) []byte {
	f.maybe("start")
	return f.recFormatter.AppendStart(dst, s)
}

func (f *panicFormatter) AppendDelta(dst []byte, d *engine.Delta) []byte {
	f.maybe("delta")
	return f.recFormatter.AppendDelta(dst, d)
}

func (f *panicFormatter) AppendChoiceEnd(dst []byte, e *engine.ChoiceEnd) []byte {
	f.maybe("choice_end")
	return f.recFormatter.AppendChoiceEnd(dst, e)
}

func (f *panicFormatter) AppendEnd(dst []byte, r *engine.Result) []byte {
	f.maybe("end")
	return f.recFormatter.AppendEnd(dst, r)
}

// panicSink is a recSink that panics at its nth delivery that is not the
// final one.
type panicSink struct {
	*recSink
	nth, calls int
}

func (s *panicSink) Deliver(frames []byte, final *engine.Result) {
	if final == nil {
		if s.calls++; s.calls == s.nth {
			panic("sink exploded")
		}
	}
	s.recSink.Deliver(frames, final)
}

// TestOwnCodePanicEndsOnlyItsRequest: a panic in a request's Formatter
// (in each of its methods) or in its Sink ends that request alone, with
// a final Result of KindInternal marked Panicked and no frame after the
// panic; its sequences and KV blocks are freed, and the streams running
// beside it end normally.
func TestOwnCodePanicEndsOnlyItsRequest(t *testing.T) {
	for _, where := range []string{"start", "delta", "choice_end", "end", "sink"} {
		t.Run(where, func(t *testing.T) {
			e := newEngine(t, func(c *Config) { c.MaxNumSeqs = 16 })
			const others = 8
			sinks := make([]*recSink, others)
			for i := range sinks {
				req := chatReq("stream "+itoaT(i), 24)
				req.Sampling.IgnoreEOS = true
				req.Stream, req.Formatter = true, &recFormatter{noStore: true}
				if err := e.Prepare(req); err != nil {
					t.Fatal(err)
				}
				sinks[i] = newSink()
				if _, err := e.Start(req, sinks[i]); err != nil {
					t.Fatal(err)
				}
			}
			req := chatReq("the one that fails", 24)
			req.Sampling.IgnoreEOS = true
			pf := &panicFormatter{at: where, nth: 3}
			if where == "start" || where == "end" || where == "choice_end" {
				pf.nth = 1
			}
			req.Stream, req.Formatter = true, pf
			if err := e.Prepare(req); err != nil {
				t.Fatal(err)
			}
			sink := &panicSink{recSink: newSink(), nth: -1}
			if where == "sink" {
				sink.nth = 3
			}
			if _, err := e.Start(req, sink); err != nil {
				t.Fatal(err)
			}
			res := sink.wait(t)
			if !res.Panicked || !errors.Is(res.Err, engine.ErrInternal) {
				t.Fatalf("failed request's Result: Panicked %v, Err %v; want a panicked KindInternal", res.Panicked, res.Err)
			}
			if bytes.Contains(sink.frames, []byte("END")) || bytes.Contains(sink.frames, []byte("ERR")) {
				t.Fatalf("frames after the panic: %q", sink.frames)
			}
			for i, s := range sinks {
				r := s.wait(t)
				if r.Err != nil || r.Panicked || !bytes.HasSuffix(s.frames, []byte("END\n")) {
					t.Fatalf("stream %d beside the panic: err %v, frames ending %q", i, r.Err, tail(s.frames))
				}
			}
			// The failed request's slots and blocks are free: a request
			// after it runs, and the engine is empty once it ended.
			if res, _, _ := run(t, e, chatReq("after", 4), true); res.Err != nil {
				t.Fatalf("request after the panic: %v", res.Err)
			}
			if st := e.Stats(); st.Running != 0 || st.Waiting != 0 || st.KVBlocksUsed != 0 {
				t.Fatalf("engine after the panic: %+v", st)
			}
		})
	}
}

// tail is the last bytes of b, for messages.
func tail(b []byte) []byte { return b[max(0, len(b)-40):] }
