package sim

import (
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/pipeline"
	"github.com/vajra-go/vajra/engine/text"
)

// groupState is where a request is in the scheduler.
type groupState uint8

const (
	stateWaiting groupState = iota // queued (new or preempted)
	statePrefill                   // admitted, first token due at readyAt
	stateDecode                    // generating one token per step
	stateDone                      // final Result delivered
)

// group is one request: a sequence group of N choices, admitted, preempted
// and finished together. It is the engine.Session handed to the caller.
// Every field but aborting is loop-only after Start.
type group struct {
	e    *Engine
	req  *engine.Request
	prep *prepared
	sink engine.Sink
	seqs []seq

	aborting atomic.Bool // Abort was called

	// The one-byte fields sit together, after aborting: a held stream
	// keeps its group, so no padding.
	state    groupState
	admitted bool // admitted at least once (admit is set)
	started  bool // first token produced (AppendStart written)
	// broken: the request's own code (its Formatter, its Sink) panicked;
	// the engine calls neither again but to deliver the final Result.
	broken bool

	readyAt time.Time // first token (after prefill) is due
	arrival time.Time
	// admit and first are the first admission and the first token, as
	// offsets from arrival (8 bytes each rather than a time.Time's 24).
	admit time.Duration
	first time.Duration
	live  int // choices not finished
	// promptBlocks are the blocks of the prompt's full blocks, shared by
	// the choices; each seq holds the blocks of the rest.
	promptBlocks []int32
	// usage is the running count; its CachedTokens (prompt tokens found
	// in the prefix cache) is set once, at first admission.
	usage    engine.Usage
	buf      []byte // this step's frames, reused
	interval int    // tokens per Delta (Request.StreamInterval, at least 1)
	promptLP []engine.TokenLogprob
	// gaps counts the time between the passes that gave g output (its
	// inter-token latencies), for the Result.
	gaps engine.Gaps
}

// active reports whether g is admitted and running (prefill or decode): it
// holds KV blocks and sequence slots.
func (g *group) active() bool { return g.state == statePrefill || g.state == stateDecode }

// Abort stops the session; see engine.Session. Safe for concurrent use;
// idempotent.
func (g *group) Abort() {
	if g.aborting.Swap(true) {
		return
	}
	e := g.e
	e.mu.Lock()
	e.aborts = append(e.aborts, g)
	e.mu.Unlock()
	e.wake()
}

// phase is what a choice is producing.
type phase uint8

const (
	phaseReason phase = iota // reasoning text
	phaseAnswer              // answer text (corpus walk or script)
	phaseTool                // a tool call's JSON arguments (script)
)

// seq is one choice of a group.
type seq struct {
	g     *group
	index int
	rng   rng
	ctx   uint64 // the "model's" view of the prompt: noise seed
	walk  walk

	reasonLeft int
	target     int // text mode: answer tokens before a natural end
	answerToks int
	script     []int // answer or tool-argument tokens given in advance
	spos       int

	ids []int
	// counts is how often the choice emitted each candidate token (see
	// corpus.candIdx), for the penalties; nil when the request has none.
	counts    []int32
	lps       []engine.TokenLogprob
	slab      []engine.TopLogprob
	reasoning []byte
	text      []byte
	args      []byte
	sentR     int // bytes of reasoning delivered
	sentT     int // bytes of text delivered
	sentA     int // bytes of args delivered
	pend      int // ids[pend:] not yet delivered in a Delta
	call      engine.ToolCall

	blocks []int32 // KV blocks beyond the shared prompt blocks

	// stop finds the request's stop strings in the answer text and holds
	// back what may begin one (engine/text's, as every engine's); nil
	// when the request has none. Its content is text (the buffer handed
	// to it at admission): only what it let through.
	stop   *text.Parser
	events []text.Event

	finish      engine.FinishReason
	stopString  string
	stopTokenID int

	// The small fields sit together at the end: a held stream keeps its
	// choices, so no padding between them.
	decisions uint32
	phase     phase
	after     phase // the phase that follows reasoning
	loop      bool  // script repeats (echo with ignore_eos or min_tokens)
	passed    bool  // a looping script has been through once
	first     bool
	toolOpen  bool
	done      bool
}

// kvTokens is the number of tokens seq s keeps in its own blocks: the
// prompt's partial last block plus its output.
func (s *seq) kvTokens() int { return s.g.prep.promptLen%BlockSize + len(s.ids) }

// feedAnswer appends txt, the next answer token's text, to s.text through
// the stop strings' hold-back, and reports whether a stop string ended
// the answer (s.text then ends before it, or after it with
// include_stop_str_in_output).
func (s *seq) feedAnswer(txt string) bool {
	if s.stop == nil {
		s.text = append(s.text, txt...)
		return false
	}
	var stopped bool
	// Feed only reads its input (it copies what it keeps): a view of the
	// vocabulary's string, not a copy.
	s.events, stopped = s.stop.Feed(s.events[:0], unsafe.Slice(unsafe.StringData(txt), len(txt)))
	s.text = s.stop.ContentBytes()
	if stopped {
		s.stopString = s.stop.StopString()
		s.releaseHeld()
	}
	return stopped
}

// releaseHeld ends the stop strings' hold-back: the text held as the
// possible start of a stop string is the answer's after all.
func (s *seq) releaseHeld() {
	if s.stop != nil && s.text != nil {
		s.events = s.stop.Finish(s.events[:0])
		s.text = s.stop.ContentBytes()
	}
}

// end marks the choice finished.
func (s *seq) end(r engine.FinishReason) {
	s.done = true
	s.finish = r
	s.g.live--
}

// flush writes the choice's undelivered output as Deltas into the group's
// frames, honouring the stop-string hold-back; final releases everything.
func (e *Engine) flush(s *seq, final bool) {
	g := s.g
	if !g.req.Stream {
		s.pend = len(s.ids)
		return
	}
	d := &e.delta
	*d = engine.Delta{Choice: s.index, Usage: &g.usage}
	switch s.phase {
	case phaseReason:
		end := utf8Complete(s.reasoning, final)
		if end == s.sentR {
			return
		}
		d.Kind, d.Text = engine.DeltaReasoning, s.reasoning[s.sentR:end]
		s.sentR = end
	case phaseTool:
		if !s.toolOpen {
			s.toolOpen = true
			d.Kind, d.ToolCallID, d.ToolName = engine.DeltaToolCallStart, s.call.ID, s.call.Name
			d.First, s.first = !s.first, true
			g.buf = g.req.Formatter.AppendDelta(g.buf, d)
			*d = engine.Delta{Choice: s.index, Usage: &g.usage}
		}
		end := utf8Complete(s.args, final)
		if end == s.sentA {
			return
		}
		d.Kind, d.Text = engine.DeltaToolCallArgs, s.args[s.sentA:end]
		s.sentA = end
	default:
		end := utf8Complete(s.text, final)
		switch {
		case end > s.sentT:
			d.Kind, d.Text = engine.DeltaText, s.text[s.sentT:end]
			s.sentT = end
		case !final && s.pend < len(s.ids) && !g.req.Reasoning.Enabled &&
			(len(g.req.Tools) == 0 || g.req.ToolChoice.Mode == engine.ToolChoiceNone):
			// Tokens with no text yet (part of a UTF-8 character, the
			// possible start of a stop string): a Delta with empty text,
			// as every engine writes when no tool-call or reasoning parser
			// reads the output (engine/pipeline's Out.Token).
			d.Kind = engine.DeltaText
		default:
			return
		}
	}
	d.TokenIDs = s.ids[s.pend:]
	if s.lps != nil {
		d.Logprobs = s.lps[s.pend:]
	}
	d.First, s.first = !s.first, true
	s.pend = len(s.ids)
	g.buf = g.req.Formatter.AppendDelta(g.buf, d)
}

// utf8Complete returns the length of the longest prefix of b that does not
// end inside a UTF-8 character (a token may hold part of one); final keeps
// everything.
func utf8Complete(b []byte, final bool) int {
	n := len(b)
	if final || n == 0 || b[n-1] < utf8.RuneSelf {
		return n
	}
	for i := n - 1; i >= 0 && i >= n-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return n
			}
			return i
		}
	}
	return n
}

// finishGroup ends g for cause (err: the failure when cause is
// pipeline.Failed; the Result of pipeline.Aborted has
// pipeline.ErrAbortedByClient): it builds the Result, appends the closing
// frames and delivers them.
func (e *Engine) finishGroup(g *group, cause pipeline.Cause, err *engine.Error, now time.Time) {
	if g.state == stateDone {
		return
	}
	switch cause {
	case pipeline.Done:
		err = nil
	case pipeline.Aborted:
		err = pipeline.ErrAbortedByClient
	}
	e.releaseGroup(g)
	g.state = stateDone
	res := newResult(len(g.seqs))
	*res = engine.Result{
		Choices:      res.Choices,
		Usage:        g.usage,
		Err:          err,
		PromptTokens: g.req.PromptTokens,
		Gaps:         g.gaps,
	}
	var admitted, first time.Time
	if g.admitted {
		admitted = g.arrival.Add(g.admit)
	}
	if g.started {
		first = g.arrival.Add(g.first)
	}
	res.SetTimes(g.arrival, admitted, first, now)
	for i := range g.seqs {
		s := &g.seqs[i]
		if !s.done {
			s.done, s.finish = true, engine.FinishAbort
			if !g.broken {
				s.releaseHeld()
			}
		}
		// No choice runs any more: publish below must not count g.
		g.live = 0
		c := &res.Choices[i]
		// The Result is the receiver's: it gets copies of the choice's
		// buffers, which go back to the engine's free lists below.
		ids, text := copyIDsAndText(s.ids, s.text)
		*c = engine.Choice{
			Index:          i,
			Text:           text,
			Reasoning:      string(s.reasoning),
			TokenIDs:       ids,
			FinishReason:   s.finish,
			StopString:     s.stopString,
			StopTokenID:    s.stopTokenID,
			Logprobs:       s.lps,
			PromptLogprobs: g.promptLP,
		}
		if s.phase == phaseTool {
			call := s.call
			call.Arguments = string(s.args)
			c.ToolCalls = []engine.ToolCall{call}
		}
	}
	e.giveBuffers(g) // the Result holds copies
	res.Panicked = g.broken
	var frames []byte
	if g.req.Stream {
		frames = e.endFrames(g, cause, res)
	}
	// The caller takes the step buffer back after this delivery (pass), or
	// it was never lent (abort, shutdown): then frames is the request's own.
	// Publish first, so that a caller woken by this final delivery already
	// sees the freed slot and blocks in Stats.
	e.publish()
	e.deliverFinal(g, frames, res)
}

// endFrames appends the frames that end g's stream for its final Result
// res: the end, or the error event of a failure after the step's frames;
// none after the client's abort or once g is broken. A panic in the
// Formatter here leaves the stream open, after its last whole event, and
// makes res a panicked Result (see engine.Result.Panicked).
func (e *Engine) endFrames(g *group, cause pipeline.Cause, res *engine.Result) (frames []byte) {
	defer func() {
		if r := recover(); r != nil {
			e.logPanic(g, r)
			res.Err, res.Panicked, frames = engine.PanicError(), true, nil
		}
	}()
	switch {
	case g.broken:
		return nil
	case cause == pipeline.Done:
		return g.req.Formatter.AppendEnd(g.buf, res)
	case cause == pipeline.Failed:
		return g.req.Formatter.AppendError(g.buf, res.Err)
	}
	return nil
}

// deliverFinal hands g's sink its final Result. A panic in the sink ends
// nothing more (g is done): it is logged, and the engine goes on.
func (e *Engine) deliverFinal(g *group, frames []byte, res *engine.Result) {
	defer func() {
		if r := recover(); r != nil {
			e.logPanic(g, r)
		}
	}()
	g.sink.Deliver(frames, res)
}

// failed ends g after a panic in its own code during a step: the frames
// of the step so far are dropped (the stream stays after its last whole
// event delivered), its KV blocks and slots are freed, and its sink gets a
// final Result with engine.PanicError and Panicked set. Other requests
// are not touched.
func (e *Engine) failed(g *group, r any, now time.Time) {
	e.logPanic(g, r)
	g.broken = true
	g.buf = g.buf[:0]
	e.finishGroup(g, pipeline.Failed, engine.PanicError(), now)
}

// logPanic logs a panic of g's own code once, with its request id and the
// stack. Called in the deferred function that recovered it, so the stack
// still holds the panicking frames.
func (e *Engine) logPanic(g *group, r any) {
	e.cfg.Logger.Error("panic in a request's output; the request is ended, the engine goes on",
		zap.String("request_id", g.req.ID), zap.Any("panic", r), zap.Stack("stack"))
}

// copyIDsAndText returns copies of ids and text in one allocation: an array
// of ints holding the ids, then the text's bytes. The copies are the
// Result's, never written by the engine; ids is capped at its length, so
// that appending to it cannot reach the text.
func copyIDsAndText(ids []int, text []byte) ([]int, string) {
	n := len(ids)
	buf := make([]int, n+(len(text)+intSize-1)/intSize)
	copy(buf, ids)
	if len(text) == 0 {
		return buf[:n:n], ""
	}
	tb := unsafe.Slice((*byte)(unsafe.Pointer(&buf[n])), len(text))
	copy(tb, text)
	return buf[:n:n], unsafe.String(&tb[0], len(tb))
}

// intSize is the size of an int in bytes.
const intSize = int(unsafe.Sizeof(int(0)))

// resultOne is a Result with its one Choice, allocated together.
type resultOne struct {
	res    engine.Result
	choice [1]engine.Choice
}

// newResult returns a Result with n zero Choices: one allocation when n is 1.
func newResult(n int) *engine.Result {
	if n == 1 {
		r := &resultOne{}
		r.res.Choices = r.choice[:]
		return &r.res
	}
	return &engine.Result{Choices: make([]engine.Choice, n)}
}

// endChoice appends the choice's remaining output and its ChoiceEnd.
func (e *Engine) endChoice(s *seq) {
	e.flush(s, true)
	if !s.g.req.Stream {
		return
	}
	ce := &e.choiceEnd
	*ce = engine.ChoiceEnd{
		Choice:       s.index,
		FinishReason: s.finish,
		StopString:   s.stopString,
		StopTokenID:  s.stopTokenID,
		TokenIDs:     s.ids[s.pend:],
		Usage:        &s.g.usage,
	}
	s.pend = len(s.ids)
	s.g.buf = s.g.req.Formatter.AppendChoiceEnd(s.g.buf, ce)
}
