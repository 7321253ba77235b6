package pipeline

import (
	"slices"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/text"
)

// Vocab is what the output side needs of a model's vocabulary. Its
// methods are called per token: they must not allocate beyond dst's
// growth, and must be safe to call from the engine's output goroutine
// while other requests use the same Vocab (read-only).
type Vocab interface {
	// VocabSize is the number of token ids.
	VocabSize() int
	// EOG reports whether id ends generation (an end-of-sequence token).
	EOG(id int32) bool
	// TokenKind is id's text.Token* kind.
	TokenKind(id int32) uint8
	// AppendText appends the text of id as a choice's parser reads it:
	// with keep (text.KeepToken said so) a control token's own text,
	// otherwise its ordinary piece (empty for a control token).
	AppendText(dst []byte, id int32, keep bool) []byte
}

// End says whether, and how, a token ended its choice.
type End uint8

const (
	// Going: the choice goes on.
	Going End = iota
	// Ended: the choice ended where the model itself ends (its
	// end-of-sequence token, or the length limit).
	Ended
	// Stopped: the choice ended where only the engine knows to end it (a
	// stop string, a stop token id, a token outside the vocabulary): a
	// worker running it must be told.
	Stopped
)

// Cause is why a request ended: the typed end cause the closing frames
// depend on.
type Cause uint8

const (
	// Done: the request ran to its end (every choice finished).
	Done Cause = iota
	// Failed: the engine failed the request; its stream gets the error
	// event.
	Failed
	// Aborted: the client aborted the request; its stream gets nothing
	// more (the client is gone).
	Aborted
)

// ErrAbortedByClient is the Result error of a request its client aborted
// (Session.Abort). errors.Is(err, engine.ErrAborted) holds for it.
var ErrAbortedByClient = &engine.Error{Kind: engine.KindAborted, Message: "the request was aborted by its client"}

// Config is what Out.Init needs of a prepared request.
type Config struct {
	Request *engine.Request
	Sink    engine.Sink
	Vocab   Vocab
	Logger  *zap.Logger
	// Parse are the output parsers' options (Prepared.Parse).
	Parse text.Options
	// Forced: tool_choice forces a call (named ForcedName, "" for
	// required): text.Forced turns the output into calls.
	Forced     bool
	ForcedName string
	// PromptTokens is the prompt's length; MaxTokens the resolved cap
	// per choice; MaxLen the context length (0: no check beyond
	// MaxTokens).
	PromptTokens int
	MaxTokens    int
	MaxLen       int
	// PieceLogprobs names the tokens of logprobs (Logprob) by their
	// output piece, a control token by nothing, as llama-server names
	// them; otherwise by their own text ("<|im_end|>"), as vLLM does.
	PieceLogprobs bool
}

// Out is one request's output: every choice's tokens, text, parsers,
// logprobs and finish, the usage and gaps, the frames the request's
// Formatter writes and the final Result. Every engine's scheduler feeds
// one Out per request and says only "these ids for this choice" (Token),
// "this choice ended" (EndChoice), "this request ended" (Finish).
//
// Loop-only: one goroutine at a time (the engine's output goroutine)
// calls its methods. Per token it allocates nothing once the choice's
// buffers have grown.
type Out struct {
	req   *engine.Request
	sink  engine.Sink
	vocab Vocab
	log   *zap.Logger
	parse text.Options

	choices  []choice
	live     int
	interval int
	maxTok   int
	maxLen   int
	prompt   int

	started bool
	done    bool
	broken  bool
	pieceLP bool // Config.PieceLogprobs
	// plain: the output is all content (no tool-call or reasoning parser,
	// no forced call), so a token with no text gets an empty text Delta.
	plain bool

	// Usage is the running count; a scheduler sets what it learns
	// besides the tokens (cached tokens, a worker's own counts).
	Usage engine.Usage
	buf   []byte // this step's frames

	arrival  time.Time
	admitted time.Time
	first    time.Time
	gaps     engine.Gaps
	promptLP []engine.TokenLogprob

	start engine.Start
	delta engine.Delta
	end   engine.ChoiceEnd
}

// choice is one choice's output state.
type choice struct {
	index  int
	parser *text.Parser
	forced *text.Forced
	events []text.Event
	piece  []byte

	gen  []int // generated ids
	n    int   // generated tokens (with those not named)
	lps  []engine.TokenLogprob
	tops []engine.TopLogprob // arena for lps' alternatives, append-only
	strs []byte              // arena for logprob token strings, append-only
	pend int                 // gen[pend:] not yet delivered in a Delta
	// hold is text kept back for the stream interval, of kind holdKind.
	hold     []byte
	holdKind engine.DeltaKind

	first       bool // a Delta was written
	done        bool
	finish      engine.FinishReason
	stopString  string
	stopTokenID int
}

// Init readies o for a request; it fails when the parsers' options are
// unknown. Call it once, before the scheduler's first call.
func (o *Out) Init(cfg *Config) error {
	req := cfg.Request
	if req.Stream && req.Formatter == nil {
		return &engine.Error{Kind: engine.KindInternal, Message: "streamed request without a Formatter"}
	}
	n := req.Sampling.Choices()
	*o = Out{req: req, sink: cfg.Sink, vocab: cfg.Vocab, log: cfg.Logger, parse: cfg.Parse,
		choices: make([]choice, n), live: n, interval: max(1, req.StreamInterval),
		maxTok: cfg.MaxTokens, maxLen: cfg.MaxLen, prompt: cfg.PromptTokens, arrival: req.Arrival, pieceLP: cfg.PieceLogprobs}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	now := time.Now()
	if o.arrival.IsZero() || o.arrival.After(now) {
		o.arrival = now
	}
	o.Usage.PromptTokens = cfg.PromptTokens
	p := &cfg.Parse
	o.plain = !cfg.Forced && (p.Tools == "" || p.ToolsOff) && (p.Reasoning == "" || p.ReasoningOff)
	for i := range o.choices {
		c := &o.choices[i]
		c.index, c.stopTokenID = i, -1
		if cfg.Forced {
			c.forced = new(text.Forced)
			c.forced.Reset(cfg.ForcedName, req.Stream)
		} else {
			p, err := text.NewParser(cfg.Parse)
			if err != nil {
				return &engine.Error{Kind: engine.KindInternal, Message: err.Error()}
			}
			c.parser = p
		}
		c.gen = make([]int, 0, min(cfg.MaxTokens, 256))
		if req.Sampling.Logprobs {
			c.lps = make([]engine.TokenLogprob, 0, min(cfg.MaxTokens, 256))
		}
	}
	return nil
}

// Choices is the number of choices.
func (o *Out) Choices() int { return len(o.choices) }

// Live is the number of choices still running.
func (o *Out) Live() int { return o.live }

// Done reports whether the request has ended (Finish was called).
func (o *Out) Done() bool { return o.done }

// Broken reports whether the request's own code panicked (Break).
func (o *Out) Broken() bool { return o.broken }

// Started reports whether the request produced output (Step was called).
func (o *Out) Started() bool { return o.started }

// ChoiceDone reports whether choice i has ended.
func (o *Out) ChoiceDone(i int) bool { return o.choices[i].done }

// Generated is the number of tokens choice i generated.
func (o *Out) Generated(i int) int { return o.choices[i].n }

// Tokens are the ids choice i generated (the Out's own slice: read only).
func (o *Out) Tokens(i int) []int { return o.choices[i].gen }

// SetAdmitted records when the request was admitted (sent to a worker,
// or first scheduled), for the Result's times.
func (o *Out) SetAdmitted(t time.Time) { o.admitted = t }

// SetPromptLogprobs gives the prompt's logprobs (completions with echo),
// which go into the stream's opening frames and every choice of the
// Result. lps is kept, not copied: an engine may fill it until the first
// Step.
func (o *Out) SetPromptLogprobs(lps []engine.TokenLogprob) { o.promptLP = lps }

// PromptLogprobs are those SetPromptLogprobs gave.
func (o *Out) PromptLogprobs() []engine.TokenLogprob { return o.promptLP }

// Step opens a step of output produced at now: the first token's time,
// the gap since the previous step (one per step, however many choices or
// tokens it carries), the stream's opening frames. Call it before a
// step's first Token.
func (o *Out) Step(now time.Time) {
	if o.first.IsZero() {
		o.first = now
	}
	o.gaps.Step(now)
	if !o.started {
		o.started = true
		if o.req.Stream {
			o.start = engine.Start{
				PromptTokens:   o.Usage.PromptTokens,
				CachedTokens:   o.Usage.CachedTokens,
				N:              len(o.choices),
				PromptLogprobs: o.promptLP,
				PromptTokenIDs: o.req.PromptTokens,
			}
			o.buf = o.req.Formatter.AppendStart(o.buf, &o.start)
		}
	}
}

// Count counts n tokens choice i generated that the engine was not told
// (a worker that names only the last of several tokens); their text comes
// with the next TokenText.
func (o *Out) Count(i, n int) {
	c := &o.choices[i]
	if c.done || n <= 0 {
		return
	}
	o.Usage.CompletionTokens += n
	c.n += n
	if c.parser != nil {
		c.parser.Count(n)
	}
}

// Token takes choice i's next token id, with its logprob when logprobs
// were asked for (lp nil otherwise; *lp is copied): the end checks (end
// of sequence, stop token ids, stop strings, length), the text through
// the choice's parser, the frames. When the token ends the choice, the
// choice's closing frames are written too (see EndChoice).
func (o *Out) Token(i int, id int32, lp *engine.TokenLogprob) End {
	return o.token(i, id, lp, nil, false)
}

// TokenText is Token with the token's text given (a worker that
// detokenized it): txt replaces id's piece, and may be empty.
func (o *Out) TokenText(i int, id int32, lp *engine.TokenLogprob, txt []byte) End {
	return o.token(i, id, lp, txt, true)
}

func (o *Out) token(i int, id int32, lp *engine.TokenLogprob, txt []byte, given bool) End {
	c := &o.choices[i]
	if c.done || o.done {
		return Going
	}
	sp := &o.req.Sampling
	v := o.vocab
	end := Going
	o.Usage.CompletionTokens++
	c.n++
	c.gen = append(c.gen, int(id))
	if c.lps != nil && lp != nil {
		c.lps = append(c.lps, *lp)
	}
	switch {
	case id < 0 || int(id) >= v.VocabSize():
		c.finish, end = engine.FinishStop, Stopped
	case v.EOG(id) && !sp.IgnoreEOS:
		c.finish, end = engine.FinishStop, Ended
	case len(sp.StopTokenIDs) > 0 && slices.Contains(sp.StopTokenIDs, int(id)):
		c.finish, c.stopTokenID, end = engine.FinishStop, int(id), Stopped
	default:
		c.piece = c.piece[:0]
		switch {
		case given:
			c.piece = append(c.piece, txt...)
		default:
			c.piece = v.AppendText(c.piece, id, text.KeepToken(v.TokenKind(id), &o.parse, sp.KeepSpecialTokens))
		}
		if c.forced != nil {
			c.events = c.forced.Feed(c.events[:0], c.piece)
			o.emit(c, c.events)
			break
		}
		var stopped bool
		c.events, stopped = c.parser.Feed(c.events[:0], c.piece)
		if hasReasoning(c.events) {
			o.Usage.ReasoningTokens++
		}
		o.emit(c, c.events)
		if stopped {
			c.finish, c.stopString, end = engine.FinishStop, c.parser.StopString(), Stopped
		}
	}
	if c.finish == "" && (c.n >= o.maxTok || o.maxLen > 0 && o.prompt+c.n >= o.maxLen) {
		c.finish, end = engine.FinishLength, Ended
	}
	if end != Going {
		o.endChoice(c)
	} else if o.plain && o.req.Stream && len(c.gen)-c.pend >= o.interval {
		// Tokens with no text yet (a control token, part of a UTF-8
		// character, the possible start of a stop string) still make a
		// chunk with empty text, as vLLM's chat and completions streams
		// do: one chunk per token (per stream interval), its logprobs
		// with it. Dialects whose events carry text only drop it.
		o.writeDelta(c, engine.DeltaText, nil, nil)
	}
	return end
}

// EndChoice ends choice i with finish (a scheduler's own end: the model
// could draw nothing, a worker's finish): its parser's held text, its
// closing frames. stopTokenID is the stop token that ended it, or -1.
// A choice already ended is left alone.
func (o *Out) EndChoice(i int, finish engine.FinishReason, stopTokenID int) {
	c := &o.choices[i]
	if c.done || o.done {
		return
	}
	c.finish = finish
	if stopTokenID >= 0 {
		c.stopTokenID = stopTokenID
	}
	o.endChoice(c)
}

// emit writes the frames of c's events. Text events carry the tokens
// generated since the last one (and their logprobs). With a stream
// interval above 1 (vLLM's --stream-interval), text is held until that
// many tokens are due, or its kind changes, or the choice ends.
func (o *Out) emit(c *choice, events []text.Event) {
	if !o.req.Stream {
		return
	}
	for k := range events {
		ev := &events[k]
		isText := ev.Kind == engine.DeltaText || ev.Kind == engine.DeltaReasoning
		if o.interval > 1 && isText {
			if len(c.hold) > 0 && c.holdKind != ev.Kind {
				o.flushHeld(c)
			}
			c.hold, c.holdKind = append(c.hold, ev.Text...), ev.Kind
			continue
		}
		o.flushHeld(c)
		o.writeDelta(c, ev.Kind, ev.Text, ev)
	}
	if len(c.hold) > 0 && len(c.gen)-c.pend >= o.interval {
		o.flushHeld(c)
	}
}

// flushHeld writes the text held for the stream interval.
func (o *Out) flushHeld(c *choice) {
	if len(c.hold) == 0 {
		return
	}
	o.writeDelta(c, c.holdKind, c.hold, nil)
	c.hold = c.hold[:0]
}

// writeDelta appends one Delta's frames; ev carries a tool call's fields.
func (o *Out) writeDelta(c *choice, kind engine.DeltaKind, txt []byte, ev *text.Event) {
	d := &o.delta
	*d = engine.Delta{Choice: c.index, Kind: kind, Text: txt, Usage: &o.Usage}
	switch kind {
	case engine.DeltaToolCallStart:
		d.ToolCallIndex, d.ToolCallID, d.ToolName = ev.ToolIndex, ev.ToolID, ev.ToolName
	case engine.DeltaToolCallArgs:
		d.ToolCallIndex = ev.ToolIndex
	default:
		d.TokenIDs = c.gen[c.pend:]
		if c.lps != nil {
			d.Logprobs = c.lps[c.pend:]
		}
		c.pend = len(c.gen)
	}
	d.First, c.first = !c.first, true
	o.buf = o.req.Formatter.AppendDelta(o.buf, d)
}

// endChoice flushes c's parser and held text and writes its closing
// frame.
func (o *Out) endChoice(c *choice) {
	if c.forced != nil {
		c.events = c.forced.Finish(c.events[:0])
	} else {
		c.events = c.parser.Finish(c.events[:0])
	}
	o.emit(c, c.events)
	if o.req.Stream {
		o.flushHeld(c)
		if c.lps != nil && c.pend < len(c.gen) {
			// Tokens whose text was held back (a stop string, a tag)
			// still carry their logprobs.
			o.writeDelta(c, engine.DeltaText, nil, nil)
		}
	}
	if c.finish == engine.FinishStop && (c.forced != nil && len(c.forced.Calls()) > 0 || c.parser != nil && c.parser.ToolCalled()) {
		c.finish = engine.FinishToolCalls
	}
	c.done = true
	o.live--
	if o.req.Stream {
		ce := &o.end
		*ce = engine.ChoiceEnd{Choice: c.index, FinishReason: c.finish, StopString: c.stopString,
			StopTokenID: c.stopTokenID, TokenIDs: c.gen[c.pend:], Usage: &o.Usage}
		c.pend = len(c.gen)
		o.buf = o.req.Formatter.AppendChoiceEnd(o.buf, ce)
	}
}

// Deliver hands the sink this step's frames, if any. A panic in the sink
// is the caller's to recover (see Break).
func (o *Out) Deliver() {
	if len(o.buf) == 0 || o.done {
		return
	}
	o.sink.Deliver(o.buf, nil)
	o.buf = o.buf[:0]
}

// Pending reports whether frames wait for Deliver.
func (o *Out) Pending() bool { return len(o.buf) > 0 }

// Break marks the request broken after a panic p in its own code (its
// Formatter, its Sink, a parser), logged once with the request id and the
// stack: call it in the deferred function that recovered p. The step's
// frames so far are dropped (the stream stays after its last whole event
// delivered); nothing of the request's own code runs again but the final
// Deliver. The scheduler then ends it with Finish(Failed, PanicError()).
func (o *Out) Break(p any) {
	o.logPanic(p)
	o.broken = true
	o.buf = o.buf[:0]
}

// Finish ends the request for cause (err is the failure when cause is
// Failed; ignored otherwise): choices still running end as aborted, the
// Result is built and returned with the frames that close the stream (the
// end, the error event of a failure appended after the step's frames,
// nothing after the client's abort or once broken). The caller releases
// what it holds and then calls DeliverFinal. Finish after Finish returns
// nil, nil.
func (o *Out) Finish(cause Cause, err *engine.Error) (frames []byte, res *engine.Result) {
	if o.done {
		return nil, nil
	}
	o.done = true
	switch cause {
	case Done:
		err = nil
	case Aborted:
		err = ErrAbortedByClient
	case Failed:
		if err == nil {
			err = &engine.Error{Kind: engine.KindInternal, Message: "the request failed"}
		}
	}
	res = &engine.Result{
		Choices:      make([]engine.Choice, len(o.choices)),
		Usage:        o.Usage,
		Err:          err,
		PromptTokens: o.req.PromptTokens,
		Gaps:         o.gaps,
	}
	res.SetTimes(o.arrival, o.admitted, o.first, time.Now())
	for i := range o.choices {
		c := &o.choices[i]
		if !c.done {
			c.done, c.finish = true, engine.FinishAbort
			if !o.broken {
				if c.forced != nil {
					c.forced.Finish(c.events[:0])
				} else {
					c.parser.Finish(c.events[:0])
				}
			}
		}
		ch := &res.Choices[i]
		*ch = engine.Choice{Index: i, TokenIDs: c.gen, FinishReason: c.finish, StopString: c.stopString,
			StopTokenID: c.stopTokenID, Logprobs: c.lps, PromptLogprobs: o.promptLP}
		switch {
		case o.broken:
			// The parser may be what panicked: the Result keeps what
			// the engine itself holds.
		case c.forced != nil:
			ch.ToolCalls, ch.Text = c.forced.Calls(), c.forced.Content()
		default:
			ch.Text, ch.Reasoning = c.parser.Content(), c.parser.Reasoning()
			if calls := c.parser.ToolCalls(); len(calls) > 0 {
				ch.ToolCalls = slices.Clone(calls)
			}
		}
	}
	res.Panicked = o.broken
	if o.req.Stream && !o.broken {
		frames = o.endFrames(cause, res)
	}
	return frames, res
}

// endFrames appends the frames that end the stream. A panic in the
// Formatter here leaves the stream open, after its last whole event, and
// makes res a panicked Result (see engine.Result.Panicked).
func (o *Out) endFrames(cause Cause, res *engine.Result) (frames []byte) {
	defer func() {
		if p := recover(); p != nil {
			o.logPanic(p)
			res.Err, res.Panicked, frames = engine.PanicError(), true, nil
		}
	}()
	switch cause {
	case Done:
		return o.req.Formatter.AppendEnd(o.buf, res)
	case Failed:
		return o.req.Formatter.AppendError(o.buf, res.Err)
	}
	return nil
}

// DeliverFinal hands the sink its final Result with the closing frames.
// A panic in the sink ends nothing more (the request is done): it is
// logged.
func (o *Out) DeliverFinal(frames []byte, res *engine.Result) {
	defer func() {
		if p := recover(); p != nil {
			o.logPanic(p)
		}
	}()
	o.buf = nil
	o.sink.Deliver(frames, res)
}

func (o *Out) logPanic(p any) {
	o.log.Error("panic in a request's output; the request is ended, the engine goes on",
		zap.String("request_id", o.req.ID), zap.Any("panic", p), zap.Stack("stack"))
}

// TopLogprob is one alternative token with its logprob, as an engine's
// sampler or worker reports it.
type TopLogprob struct {
	TokenID int32
	Logprob float32
}

// Logprob builds choice i's logprob entry for token id: its string and at
// most k of tops, in the choice's append-only arenas: a full arena is
// followed by a new chunk twice its size (earlier entries keep pointing at
// the old one, never written again), so a request allocates a handful of
// chunks in all, not per token.
func (o *Out) Logprob(i int, id int32, logprob float32, tops []TopLogprob, k int) engine.TokenLogprob {
	c := &o.choices[i]
	lp := engine.TokenLogprob{TokenID: int(id), Token: o.tokenString(c, id), Logprob: logprob}
	if k > 0 && len(tops) > 0 {
		if cap(c.tops)-len(c.tops) < min(k, len(tops)) {
			// A new chunk, twice the last: the entries written keep the
			// old one, so nothing is copied.
			c.tops = make([]engine.TopLogprob, 0, max(64*min(k, len(tops)), 2*cap(c.tops)))
		}
		at := len(c.tops)
		for j, t := range tops {
			if j == k {
				break
			}
			c.tops = append(c.tops, engine.TopLogprob{TokenID: int(t.TokenID), Token: o.tokenString(c, t.TokenID), Logprob: t.Logprob})
		}
		lp.Top = c.tops[at:len(c.tops):len(c.tops)]
	}
	return lp
}

// tokenString is the text of id in c's string arena.
func (o *Out) tokenString(c *choice, id int32) string {
	if id < 0 || int(id) >= o.vocab.VocabSize() {
		return ""
	}
	if cap(c.strs)-len(c.strs) < 64 {
		// A new chunk, twice the last: the strings written keep the old
		// one, so nothing is copied.
		c.strs = make([]byte, 0, max(4096, 2*cap(c.strs)))
	}
	at := len(c.strs)
	c.strs = o.vocab.AppendText(c.strs, id, !o.pieceLP)
	b := c.strs[at:]
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// hasReasoning reports whether a token's events hold reasoning text: the
// token counts as a reasoning token.
func hasReasoning(events []text.Event) bool {
	for i := range events {
		if events[i].Kind == engine.DeltaReasoning {
			return true
		}
	}
	return false
}

// ToolCalls are the calls choice i's output holds so far (the Out's own
// slice: read only).
func (o *Out) ToolCalls(i int) []engine.ToolCall {
	c := &o.choices[i]
	if c.forced != nil {
		return c.forced.Calls()
	}
	return c.parser.ToolCalls()
}

// NameTokens sets the Token strings of lps and their alternatives that
// have none (a worker that reports ids only) from v. It allocates: for
// the prompt's logprobs, once per request.
func NameTokens(v Vocab, lps []engine.TokenLogprob) {
	name := func(id int) string {
		if id < 0 || id >= v.VocabSize() {
			return ""
		}
		return string(v.AppendText(nil, int32(id), true))
	}
	for i := range lps {
		lp := &lps[i]
		if lp.Token == "" {
			lp.Token = name(lp.TokenID)
		}
		for j := range lp.Top {
			if lp.Top[j].Token == "" {
				lp.Top[j].Token = name(lp.Top[j].TokenID)
			}
		}
	}
}
