package actors

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/codegen/anthropic"
	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
)

// In-process generation: an actor of the same actor system asks for a
// generation with a message instead of an HTTP request. The module root
// re-exports these types (vajra.Generate, vajra.Output, ...) and owns the
// address they are sent to; this file is the session side: one actor per
// request, as for HTTP, which watches the requester, starts the engine
// session and ends it. The engine's deliveries go from the engine's
// goroutine straight to the requester's mailbox, one notice per batch.

// Generate asks for one generation. Send it to the server's address
// (vajra.Server.PID) with Request, so that the replies go to the sender,
// or set ReplyTo. The replies are *Output messages, at least one, the last
// of which carries the final Result.
//
// A Generate is one request: do not change it or send it again until its
// final Output arrived. The server reads Messages, Prompt, Tools and
// ResponseFormat only until the engine started and never keeps them
// after the final Output.
type Generate struct {
	// ID names the request in logs and metrics; empty gets a generated one.
	ID string
	// Model is a served model name; empty means the server's first.
	Model string

	// The prompt: Messages (rendered with the engine's chat template),
	// else Prompt, else PromptTokens.
	Messages     []engine.Message
	Prompt       string
	PromptTokens []int

	Tools             []engine.Tool
	ToolChoice        engine.ToolChoice
	ParallelToolCalls bool
	ResponseFormat    engine.ResponseFormat
	Reasoning         engine.Reasoning
	// Sampling holds the sampling parameters with the engine's meanings
	// (engine.Sampling). N is at most MaxLocalChoices, and 1 with the
	// Messages and Responses dialects.
	Sampling engine.Sampling

	// Dialect selects what each Output carries: engine.DialectNone (the
	// zero value) gives typed Deltas; DialectChat, DialectCompletions,
	// DialectResponses or DialectMessages give the Frames an HTTP client
	// of that API receives (server-sent events).
	Dialect engine.Dialect
	// Chunked wraps each event of Frames in an HTTP/1.1 chunk, as on the
	// wire; otherwise events are bare.
	Chunked bool
	// IncludeUsage ends a chat or completions stream with a usage chunk
	// (stream_options.include_usage).
	IncludeUsage bool
	// FinalOnly asks for no Frames or Deltas: one Output with the final
	// Result (full texts, usage) at the end.
	FinalOnly bool

	// ReplyTo receives the Outputs; nil means the sender of the Generate.
	// The server watches it: when it stops, the engine session is aborted.
	ReplyTo *actor.PID
}

// MaxLocalChoices is the most choices (Sampling.N) a Generate may ask for.
const MaxLocalChoices = openai.MaxChoices

// CancelGeneration asks the server to abort the generation Request, the
// same pointer that was sent. Send it to the server's address. The
// requester still gets the final Output, whose Result has an Err of kind
// engine.KindAborted (or the Result, if the engine finished first). A
// cancel for a request that ended is ignored.
type CancelGeneration struct {
	Request *Generate
}

// Delta is one piece of typed output (Generate.Dialect engine.DialectNone).
type Delta struct {
	Choice int
	Kind   engine.DeltaKind
	// Text is the text of the step's tokens (the arguments' piece for
	// DeltaToolCallArgs). Valid until the next Output.Take.
	Text []byte
	// Tokens is the number of tokens whose text Text holds.
	Tokens int
	// ToolCallIndex, ToolCallID and ToolName identify a tool call
	// (DeltaToolCallStart; ToolCallIndex also for DeltaToolCallArgs).
	ToolCallIndex int
	ToolCallID    string
	ToolName      string
}

// Output is the message a requester receives: a notice that output is
// ready. The same *Output comes every time for one request; at most one
// notice is in the requester's mailbox at a time, and what the engine
// produced meanwhile is coalesced. On each notice the requester calls
// Take, in its Receive, and reads Frames or Deltas and Final.
type Output struct {
	// Request is the Generate this output answers.
	Request *Generate

	// Filled by Take; valid until the next Take (their memory is reused).
	//
	// Frames holds the dialect's frames produced since the last Take: one
	// or more engine steps' worth, whole events only.
	Frames []byte
	// Deltas holds the typed output since the last Take (DialectNone).
	Deltas []Delta
	// Final is set by the Take that ends the request: the engine's Result
	// (choices with their full text and finish reason, usage, timings) or,
	// when the request failed or was refused or aborted, a Result whose Err
	// says why (engine.KindInvalid, KindContextLength, KindOverloaded,
	// KindClosed while the server drains or stops, KindAborted). No notice
	// follows it. The Result is the requester's to keep.
	Final *engine.Result

	mu       sync.Mutex
	pending  []byte // delivered, not yet taken; swaps with buf
	final    *engine.Result
	notified bool // a notice is on its way
	detached bool // nothing more is delivered
	typed    bool // pending holds delta records (deltaFormatter)
	buf      []byte
}

// Take moves what was produced since the last Take into Frames, Deltas
// and Final. It reports whether there was anything. Call it from the
// requester, once per notice (a notice not taken stops further notices).
// It never allocates in steady state, except a string per tool call for
// a typed Delta's ToolCallID and ToolName.
func (o *Output) Take() bool {
	o.mu.Lock()
	b := o.pending
	o.pending = o.buf[:0]
	final := o.final
	o.final = nil
	o.notified = false
	o.mu.Unlock()
	o.buf = b
	o.Final = final
	o.Frames, o.Deltas = nil, o.Deltas[:0]
	if o.typed {
		o.Deltas = decodeDeltas(o.Deltas, b)
	} else if len(b) > 0 {
		o.Frames = b
	}
	return len(b) > 0 || final != nil
}

// deliver appends what the engine produced (on its goroutine). It
// reports whether the requester must be notified, and whether the output
// took it (it was not detached).
func (o *Output) deliver(frames []byte, final *engine.Result) (post, took bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.detached {
		return false, false
	}
	o.pending = append(o.pending, frames...)
	if final != nil {
		o.final = final
		o.detached = true
	}
	post = !o.notified
	o.notified = true
	return post, true
}

// detach drops later deliveries (the requester is gone).
func (o *Output) detach() {
	o.mu.Lock()
	o.detached = true
	o.pending = nil
	o.mu.Unlock()
}

// localSession is the actor of one in-process request.
type localSession struct {
	actorBase // spawn, serve, stop, panics (base.go)

	g       *Generate
	replyTo *actor.PID
	arrival time.Time
	onEnd   func()

	ereq engine.Request
	es   engine.Session
	out  Output
	sink localSink

	ended bool      // onEnd ran: the request is over for admission control
	done  localDone // preallocated: the sink sends it with the final
}

// localDone tells a local session the engine delivered its final Result.
type localDone struct{}

// StartLocal spawns the session of an in-process request whose Outputs go
// to replyTo. onEnd runs once when the request is over (the final Result
// was handed to the requester, or the requester stopped), from the
// session actor: the caller returns the admission permit there. The
// returned handle's ConnClosed cancels the request (CancelGeneration).
// Safe for concurrent use.
func (s *Sessions) StartLocal(g *Generate, replyTo *actor.PID, arrival time.Time, onEnd func()) Handle {
	ls := &localSession{g: g, replyTo: replyTo, arrival: arrival, onEnd: onEnd}
	ls.sink.ls = ls
	ls.out.Request = g
	id := g.ID
	if id == "" {
		id = newID("local-")
	}
	ls.start(s, ls, EndpointInProcess, id)
	return ls
}

// ReplyLocal answers a request that got no session (refused by admission
// control, or cancelled while it waited) with a final Output whose Result
// carries err. Safe for concurrent use.
func (s *Sessions) ReplyLocal(g *Generate, replyTo *actor.PID, err *engine.Error) {
	o := &Output{Request: g, final: &engine.Result{Err: err}, notified: true, detached: true}
	s.root.Send(replyTo, o)
}

// Mailbox returns a producer of Vajra's own mailboxes, on the sessions'
// worker pool: a message to an idle actor costs no allocation. Actors of
// an embedding program that receive Outputs may use it (actor.WithMailbox)
// to receive their tokens without allocating; it stays usable after the
// server stopped (see WorkerPool).
func (s *Sessions) Mailbox() actor.MailboxProducer { return s.pool.Producer() }

// Receive implements actor.Actor (actorBase.serve).
func (ls *localSession) Receive(ctx actor.Context) { ls.serve(ls, ctx) }

// clientGone runs for the handle's ConnClosed, which cancels the request:
// the engine delivers the final Result.
func (ls *localSession) clientGone(actor.Context) {
	if ls.es != nil {
		ls.es.Abort()
	}
}

// receive handles the session's messages but the base's.
func (ls *localSession) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *localDone:
		ls.end(ctx, true)
	case *actor.Terminated:
		if m.Who.Equal(ls.replyTo) {
			// The requester is gone: free the engine slot now.
			ls.out.detach()
			if ls.es != nil {
				ls.es.Abort()
			}
			ls.end(ctx, false)
		}
	}
}

// begin validates, prepares and starts the engine session.
func (ls *localSession) begin(ctx actor.Context) {
	ctx.Watch(ls.replyTo)
	if e := ls.build(); e != nil {
		ls.fail(ctx, e)
		return
	}
	eng := ls.owner.cfg.Engine
	if err := eng.Prepare(&ls.ereq); err != nil {
		ls.fail(ctx, engine.AsError(err))
		return
	}
	ls.ereq.ID = ls.id
	ls.ereq.Arrival = ls.arrival
	ls.ereq.StreamInterval = ls.owner.cfg.StreamInterval
	es, err := eng.Start(&ls.ereq, &ls.sink)
	if err != nil {
		ls.fail(ctx, engine.AsError(err))
		return
	}
	ls.es = es
	// The engine keeps what it needs of the prompt: a long generation
	// does not hold the conversation alive.
	ls.ereq.Messages, ls.ereq.Tools = nil, nil
}

// build checks the request and fills the engine request and, for a
// stream, its Formatter.
func (ls *localSession) build() *engine.Error {
	g, r := ls.g, &ls.ereq
	r.Model = g.Model
	if r.Model == "" && len(ls.owner.cfg.Models) > 0 {
		r.Model = ls.owner.cfg.Models[0]
	}
	if !ls.owner.servesModel(r.Model) {
		return &engine.Error{Kind: engine.KindInvalid, Param: "model", Message: fmt.Sprintf("The model %q does not exist.", r.Model)}
	}
	e := checkLocal(g)
	if e != nil {
		return e
	}
	r.Messages, r.Prompt = g.Messages, g.Prompt
	if r.PromptTokens, e = promptIDs(g.PromptTokens); e != nil {
		return e
	}
	r.Tools, r.ToolChoice, r.ParallelToolCalls = g.Tools, g.ToolChoice, g.ParallelToolCalls
	r.ResponseFormat, r.Reasoning, r.Sampling = g.ResponseFormat, g.Reasoning, g.Sampling
	if g.FinalOnly {
		return nil
	}
	r.Stream = true
	framing := codegen.FramingRaw
	if g.Chunked {
		framing = codegen.FramingChunked
	}
	si := &r.StreamInfo
	*si = engine.StreamInfo{Dialect: g.Dialect, Model: r.Model, Created: time.Now().Unix(), Chunked: g.Chunked, IncludeUsage: g.IncludeUsage}
	switch g.Dialect {
	case engine.DialectNone:
		ls.out.typed = true
		r.Formatter = deltaFormatter{}
	case engine.DialectChat:
		si.ID = newID("chatcmpl-")
		r.Formatter = openai.NewChatFormatter(si.ID, si.Model, si.Created, openai.ChatStreamOptions{IncludeUsage: g.IncludeUsage, Framing: framing})
	case engine.DialectCompletions:
		si.ID = newID("cmpl-")
		f := new(openai.CompletionFormatter)
		f.Reset(si.ID, si.Model, si.Created, openai.CompletionStreamOptions{IncludeUsage: g.IncludeUsage, Framing: framing})
		r.Formatter = f
	case engine.DialectMessages:
		si.ID, si.IncludeUsage = newID("msg_"), false
		r.Formatter = anthropic.NewStreamFormatter(anthropic.StreamConfig{ID: si.ID, Model: si.Model, Framing: framing, Ping: true})
	case engine.DialectResponses:
		si.ID, si.IncludeUsage = newID("resp_"), false
		s := &g.Sampling
		topP := s.TopP
		if topP == 0 {
			topP = 1
		}
		r.Formatter = openai.NewResponsesFormatter(openai.ResponseMeta{
			ID: si.ID, Model: si.Model, CreatedAt: si.Created,
			ParallelToolCalls: g.ParallelToolCalls, Temperature: s.Temperature, TopP: topP,
			MaxOutputTokens: s.MaxTokens, TopLogprobs: s.TopLogprobs,
			Format: openai.ResponseFormatEcho{Type: "text"}, Truncation: "disabled",
		}, framing)
	}
	return nil
}

// checkLocal checks what the HTTP dialects' decoders check and the engine
// does not: the request's shape and the ranges of its parameters.
// promptIDs converts a Generate's token ids to engine.Request's int32 ones
// (nil for none); an id no int32 holds is outside every vocabulary.
func promptIDs(ids []int) ([]int32, *engine.Error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		if id < math.MinInt32 || id > math.MaxInt32 {
			return nil, &engine.Error{Kind: engine.KindInvalid, Param: "prompt",
				Message: fmt.Sprintf("prompt token %d is %d, outside the vocabulary.", i, id)}
		}
		out[i] = int32(id)
	}
	return out, nil
}

func checkLocal(g *Generate) *engine.Error {
	invalid := func(param, msg string) *engine.Error {
		return &engine.Error{Kind: engine.KindInvalid, Param: param, Message: msg}
	}
	s := &g.Sampling
	switch {
	case len(g.Messages) == 0 && g.Prompt == "" && len(g.PromptTokens) == 0:
		return invalid("messages", "A Generate needs Messages, a Prompt or PromptTokens.")
	case g.Dialect > engine.DialectMessages:
		return invalid("dialect", fmt.Sprintf("Unknown dialect %d.", g.Dialect))
	case s.N < 0 || s.N > MaxLocalChoices:
		return invalid("n", fmt.Sprintf("n must be between 1 and %d; got %d.", MaxLocalChoices, s.N))
	case s.N > 1 && (g.Dialect == engine.DialectMessages || g.Dialect == engine.DialectResponses):
		return invalid("n", "This dialect streams one choice; n must be 1.")
	case s.Temperature < 0 || s.Temperature > 2:
		return invalid("temperature", fmt.Sprintf("temperature must be between 0 and 2; got %g.", s.Temperature))
	case s.TopP < 0 || s.TopP > 1:
		return invalid("top_p", fmt.Sprintf("top_p must be between 0 and 1; got %g.", s.TopP))
	case s.TopK < 0:
		return invalid("top_k", fmt.Sprintf("top_k must not be negative; got %d.", s.TopK))
	case s.MaxTokens < 0:
		return invalid("max_tokens", fmt.Sprintf("max_tokens must not be negative; got %d.", s.MaxTokens))
	case s.TopLogprobs < 0 || s.TopLogprobs > engine.MaxTopLogprobs:
		return invalid("top_logprobs", fmt.Sprintf("top_logprobs must be between 0 and %d; got %d.", engine.MaxTopLogprobs, s.TopLogprobs))
	case s.MinP < 0 || s.MinP > 1:
		return invalid("min_p", fmt.Sprintf("min_p must be between 0 and 1; got %g.", s.MinP))
	case s.RepetitionPenalty < 0:
		return invalid("repetition_penalty", fmt.Sprintf("repetition_penalty must be positive; got %g.", s.RepetitionPenalty))
	}
	return nil
}

// fail ends a request that failed before its engine session started.
func (ls *localSession) fail(ctx actor.Context, e *engine.Error) {
	if ce := ls.owner.log.Check(zap.DebugLevel, "in-process request refused"); ce != nil {
		ce.Write(zap.String("request_id", ls.id), zap.String("param", e.Param), zap.String("message", e.Message))
	}
	if post, _ := ls.out.deliver(nil, &engine.Result{Err: e}); post {
		ls.owner.root.Send(ls.replyTo, &ls.out)
	}
	ls.end(ctx, true)
}

// end ends the request for admission control (once) and stops the actor.
func (ls *localSession) end(ctx actor.Context, unwatch bool) {
	if !ls.ended {
		ls.ended = true
		if unwatch {
			ctx.Unwatch(ls.replyTo)
		}
		if ls.onEnd != nil {
			ls.onEnd()
		}
	}
	ls.stop(ctx)
}

// cleanup runs once when the actor stopped, also after a panic: a request
// that did not end gets a final Output with an internal error.
func (ls *localSession) cleanup() {
	if !ls.ended {
		if !ls.panicked { // a panic was logged already
			ls.logger().Error("in-process session stopped before its request ended")
		}
		ls.ended = true
		if ls.es != nil {
			ls.es.Abort()
		}
		if post, _ := ls.out.deliver(nil, &engine.Result{Err: &engine.Error{Kind: engine.KindInternal, Message: "The session failed; see the server log."}}); post {
			ls.owner.root.Send(ls.replyTo, &ls.out)
		}
		if ls.onEnd != nil {
			ls.onEnd()
		}
	}
}

// localSink receives the engine's deliveries on the engine's goroutine and
// hands them to the requester: one notice per batch, none while one is
// pending.
type localSink struct{ ls *localSession }

// Deliver implements engine.Sink.
func (k *localSink) Deliver(frames []byte, final *engine.Result) {
	ls := k.ls
	if final != nil {
		if o := ls.owner.cfg.Observer; o != nil {
			ls.observe(o, ls.ereq.Model, final)
		}
	}
	post, took := ls.out.deliver(frames, final)
	if post {
		ls.owner.root.Send(ls.replyTo, &ls.out)
	}
	if final != nil && took {
		// The session ends the request (a session whose requester left
		// has ended it already and stopped).
		ls.owner.root.Send(ls.self, &ls.done)
	}
}

// deltaFormatter is the Formatter of typed output (DialectNone): it
// writes each delta as a record that Output.Take decodes into a Delta,
// so that typed output travels the same coalescing path as frames, with
// no allocation. A record is the kind byte, then uvarints: choice, tool
// call index, tokens, text length, the text, and for a tool call's start
// the lengths and bytes of its id and name.
type deltaFormatter struct{}

func (deltaFormatter) AppendStart(dst []byte, _ *engine.Start) []byte { return dst }

func (deltaFormatter) AppendDelta(dst []byte, d *engine.Delta) []byte {
	dst = append(dst, byte(d.Kind))
	dst = binary.AppendUvarint(dst, uint64(d.Choice))
	dst = binary.AppendUvarint(dst, uint64(d.ToolCallIndex))
	dst = binary.AppendUvarint(dst, uint64(len(d.TokenIDs)))
	dst = binary.AppendUvarint(dst, uint64(len(d.Text)))
	dst = append(dst, d.Text...)
	if d.Kind == engine.DeltaToolCallStart {
		dst = binary.AppendUvarint(dst, uint64(len(d.ToolCallID)))
		dst = append(dst, d.ToolCallID...)
		dst = binary.AppendUvarint(dst, uint64(len(d.ToolName)))
		dst = append(dst, d.ToolName...)
	}
	return dst
}

func (deltaFormatter) AppendChoiceEnd(dst []byte, _ *engine.ChoiceEnd) []byte { return dst }
func (deltaFormatter) AppendEnd(dst []byte, _ *engine.Result) []byte          { return dst }
func (deltaFormatter) AppendError(dst []byte, _ *engine.Error) []byte         { return dst }

// decodeDeltas appends the Deltas of the records in b to dst; their Text
// slices point into b.
func decodeDeltas(dst []Delta, b []byte) []Delta {
	uv := func() int {
		v, n := binary.Uvarint(b)
		b = b[n:]
		return int(v)
	}
	for len(b) > 0 {
		d := Delta{Kind: engine.DeltaKind(b[0])}
		b = b[1:]
		d.Choice, d.ToolCallIndex, d.Tokens = uv(), uv(), uv()
		n := uv()
		d.Text, b = b[:n:n], b[n:]
		if d.Kind == engine.DeltaToolCallStart {
			n = uv()
			d.ToolCallID, b = string(b[:n]), b[n:]
			n = uv()
			d.ToolName, b = string(b[:n]), b[n:]
		}
		dst = append(dst, d)
	}
	return dst
}

// System returns the actor system the sessions run in.
func (s *Sessions) System() *actor.ActorSystem { return s.system }
