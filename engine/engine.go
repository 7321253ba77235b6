// Package engine is the boundary between Vajra's request sessions and an LLM
// engine. It knows nothing of HTTP, actors or gnet.
//
// A session actor builds a Request from a decoded API body, calls
// Engine.Prepare before it writes any status line (so a prompt that does not
// fit fails with a clean 400), then Engine.Start with a Sink. From then on the
// engine emits, once per scheduler step, the already-framed wire bytes of that
// step for the session, and finally a Result with usage.
//
// Formatting happens on the engine side, once per token, into buffers the
// engine reuses: the actor forwards the bytes untouched. A Go engine writes
// them with the request's Formatter, which the dialect supplies; an engine
// with formatters of its own (a native engine) ignores the Formatter and
// writes them from Request.StreamInfo, which holds the constant parts of the
// frames. Either way the session owns what is not the engine's: the ids and
// times of the response, the Responses store's save (from the final Result)
// and the error event that ends a stream the session itself must end.
package engine

import (
	"errors"
	"time"
)

// Engine is an LLM engine. All methods are safe for concurrent use.
type Engine interface {
	// Prepare renders req's prompt (chat template for Messages, or the raw
	// Prompt / PromptTokens), tokenizes it into req.PromptTokens and checks
	// it against the context length, including the room max tokens needs.
	// It fails with an *Error of kind KindContextLength or KindInvalid.
	// Prepare never queues or generates: it is cheap enough to run before
	// the 200.
	Prepare(req *Request) error

	// Start admits a prepared request. The engine calls sink.Deliver on its
	// own goroutine once per step in which the session produced output, and
	// exactly once with a non-nil final Result (also after Abort or Close).
	// Start fails with KindOverloaded when the waiting queue is full and with
	// KindClosed after Close. A panic in what the engine runs for this
	// request alone (its Formatter, its Sink) ends this session only, with
	// a final Result whose Panicked is set; the engine goes on.
	Start(req *Request, sink Sink) (Session, error)

	// Tokenize and Detokenize expose the engine's tokenizer.
	Tokenize(text string) []int
	Detokenize(ids []int) string

	// Stats returns the current load figures; cheap, lock-free for callers.
	Stats() Stats

	// Close aborts every session and stops the engine. Idempotent.
	Close() error
}

// Session is one admitted request inside the engine.
type Session interface {
	// Abort stops the session and frees its sequence slot and KV blocks at
	// once. Safe for concurrent use; idempotent. The sink still gets its
	// final Result, with Err set to an *Error of KindAborted unless the
	// session had already finished.
	Abort()
}

// Sink receives a session's output.
type Sink interface {
	// Deliver is called on the engine's goroutine. frames holds the framed
	// wire bytes the session produced in one step (possibly empty) and is
	// valid only during the call: the sink copies what it keeps. final is
	// non-nil on the last call only; after it the sink is never called
	// again and owns final. The frames that end a stream come in that
	// last call, with final. Deliver must not block.
	Deliver(frames []byte, final *Result)
}

// Formatter writes the wire frames of one streamed response: the dialect's
// SSE events (or WebSocket frames), already wrapped in the transport framing
// (an HTTP/1.1 chunk per event) when the dialect's writer was built for it.
// A Formatter is built per request by the dialect, with the constant parts of
// its frames (id, model, created) rendered once. Every method appends to dst
// and returns it, and must not allocate in steady state. The engine calls a
// Formatter from one goroutine at a time. The *Start, *Delta and *ChoiceEnd
// arguments (and the slices they hold) are valid only during the call: the
// engine reuses them; a Formatter copies what it keeps. AppendEnd's *Result
// is the final one, owned by the sink after Deliver. A Formatter writes
// frames only: saving or reporting the response is the session's, from the
// final Result.
type Formatter interface {
	// AppendStart appends the frames that open the stream, once, before any
	// delta (Anthropic message_start, Responses response.created, ...).
	AppendStart(dst []byte, s *Start) []byte
	// AppendDelta appends the frames of one choice's output in one step.
	AppendDelta(dst []byte, d *Delta) []byte
	// AppendChoiceEnd appends the frames that close one choice.
	AppendChoiceEnd(dst []byte, e *ChoiceEnd) []byte
	// AppendEnd appends the frames that end the whole stream (usage chunk,
	// data: [DONE], message_stop, response.completed, ...).
	AppendEnd(dst []byte, res *Result) []byte
	// AppendError appends the dialect's in-stream error event and whatever
	// ends the stream cleanly after it: for failures the engine detects
	// after the 200. (A stream the session must end itself gets its error
	// event from the session's dialect, not from here.)
	AppendError(dst []byte, err *Error) []byte
}

// Start describes the stream's opening, for Formatter.AppendStart.
type Start struct {
	PromptTokens int
	CachedTokens int
	N            int // number of choices
	// PromptLogprobs holds the prompt's logprobs when the request asked for
	// them with echo (completions); nil otherwise.
	PromptLogprobs []TokenLogprob
	// PromptTokenIDs are the prompt's token ids (for echo).
	PromptTokenIDs []int32
}

// DeltaKind says what a Delta carries.
type DeltaKind uint8

const (
	// DeltaText is generated answer text.
	DeltaText DeltaKind = iota
	// DeltaReasoning is reasoning ("thinking") text, before the answer.
	DeltaReasoning
	// DeltaToolCallStart opens a tool call: ToolCallIndex, ToolCallID and
	// ToolName are set; Text is empty.
	DeltaToolCallStart
	// DeltaToolCallArgs carries a piece of a tool call's JSON arguments in
	// Text, for the call at ToolCallIndex.
	DeltaToolCallArgs
)

// Delta is one choice's output in one step. Its slices are valid only during
// the Formatter call.
type Delta struct {
	Choice int
	Kind   DeltaKind
	// First is true on the first delta of this choice (a chat chunk then
	// carries "role":"assistant").
	First bool
	// Text is the text of the step's token(s) for this choice.
	Text []byte
	// TokenIDs are the ids of the tokens whose text is in Text.
	TokenIDs []int
	// Logprobs has one entry per token in TokenIDs when logprobs were asked for.
	Logprobs []TokenLogprob

	ToolCallIndex int
	ToolCallID    string
	ToolName      string

	// Usage is the running usage so far (for continuous usage stats).
	Usage *Usage
}

// ChoiceEnd closes one choice.
type ChoiceEnd struct {
	Choice       int
	FinishReason FinishReason
	// StopString is the stop string that ended the choice, if any.
	StopString string
	// StopTokenID is the stop token that ended the choice, or -1.
	StopTokenID int
	// TokenIDs are the choice's ids no Delta carried (its end-of-sequence
	// token, the tokens of a stop string held back): with the Deltas'
	// TokenIDs they are every token the choice generated.
	TokenIDs []int
	Usage    *Usage
}

// FinishReason is why a choice ended, in OpenAI's words; dialects map it.
type FinishReason string

const (
	FinishStop      FinishReason = "stop"
	FinishLength    FinishReason = "length"
	FinishToolCalls FinishReason = "tool_calls"
	FinishAbort     FinishReason = "abort"
)

// Usage counts tokens.
type Usage struct {
	PromptTokens     int
	CompletionTokens int // includes ReasoningTokens
	CachedTokens     int // prompt tokens served from the prefix cache
	ReasoningTokens  int
}

// TotalTokens is prompt plus completion tokens.
func (u Usage) TotalTokens() int { return u.PromptTokens + u.CompletionTokens }

// TokenLogprob is the logprob of one token, with its alternatives.
type TokenLogprob struct {
	TokenID int
	Token   string
	Logprob float32
	// Top holds up to 20 alternatives, sorted by Logprob descending; the
	// sampled token is among them when len(Top) > 0.
	Top []TopLogprob
}

// TopLogprob is one alternative token.
type TopLogprob struct {
	TokenID int
	Token   string
	Logprob float32
}

// Result is the final outcome of a session.
type Result struct {
	Choices []Choice
	Usage   Usage
	// Err is nil on success; an *Error otherwise (KindAborted when the
	// session was aborted).
	Err *Error
	// Panicked says the engine ended the session because code it ran for
	// this request alone (its Formatter, its Sink) panicked. Err is then
	// an *Error of KindInternal, the engine logged the panic, and it
	// wrote no frame after it: a stream is left open, after its last
	// whole event, for the session to end with the dialect's error event.
	Panicked bool
	// Timing, for metrics.
	Queued       time.Duration // from Start to admission
	FirstToken   time.Duration // from Start to the first token
	EndToEnd     time.Duration // from Start to the end
	PromptTokens []int32       // the prompt's token ids (Request.PromptTokens)
	// Gaps are the request's inter-token gaps, one per engine step with
	// output after the first, for vllm:inter_token_latency_seconds. An
	// engine that does not count them leaves them empty (not Recorded):
	// the metric then estimates them from the timings above.
	Gaps Gaps
}

// SetTimes fills r's timings from a request's arrival, its first
// admission (zero if it was never admitted), its first token (zero if
// none) and its end.
func (r *Result) SetTimes(arrival, admitted, first, end time.Time) {
	r.EndToEnd = end.Sub(arrival)
	if !admitted.IsZero() {
		r.Queued = admitted.Sub(arrival)
	}
	if !first.IsZero() {
		r.FirstToken = first.Sub(arrival)
	}
}

// Choice is one finished choice.
type Choice struct {
	Index        int
	Text         string
	Reasoning    string
	TokenIDs     []int
	ToolCalls    []ToolCall
	FinishReason FinishReason
	StopString   string
	StopTokenID  int // -1 when none
	Logprobs     []TokenLogprob
	// PromptLogprobs is set for completions with echo and logprobs.
	PromptLogprobs []TokenLogprob
}

// Stats are the engine's load figures.
type Stats struct {
	// Running counts the requests running (admitted and not ended), a
	// request of n choices once: vllm:num_requests_running.
	Running int
	// Waiting counts the requests queued for admission, preempted ones
	// included.
	Waiting          int
	KVUsage          float64 // 0..1, fraction of KV blocks in use
	KVBlocksTotal    int
	KVBlocksUsed     int
	PrefixQueries    uint64 // prompt tokens looked up in the prefix cache
	PrefixHits       uint64 // of those, tokens found
	Preemptions      uint64
	PromptTokens     uint64
	GenerationTokens uint64
	Healthy          bool
}

// ErrorKind classifies engine errors so the server can map them to a status
// and a dialect's error body.
type ErrorKind uint8

const (
	KindInvalid       ErrorKind = iota + 1 // bad request parameter (400)
	KindContextLength                      // prompt + max tokens exceed the context (400 context_length_exceeded)
	KindOverloaded                         // waiting queue full (429 / 529)
	KindAborted                            // aborted by the client or shutdown
	KindClosed                             // engine stopped (503)
	KindInternal                           // engine failure (500)
)

// Error is an engine error.
type Error struct {
	Kind    ErrorKind
	Param   string // the request parameter at fault, when one is
	Message string
}

func (e *Error) Error() string { return "engine: " + e.Message }

// Is makes errors.Is(err, ErrAborted) and friends match by kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Kind == e.Kind
}

// Sentinels for errors.Is, by kind.
var (
	ErrInvalid       = &Error{Kind: KindInvalid}
	ErrContextLength = &Error{Kind: KindContextLength}
	ErrOverloaded    = &Error{Kind: KindOverloaded}
	ErrAborted       = &Error{Kind: KindAborted}
	ErrClosed        = &Error{Kind: KindClosed}
	ErrInternal      = &Error{Kind: KindInternal}
)

// PanicError returns the error of a session the engine ended because code it
// ran for that request panicked (Result.Panicked). Its message names no
// detail of the panic: the engine logs that.
func PanicError() *Error {
	return &Error{Kind: KindInternal, Message: "internal error while writing the response; see the server log"}
}

// AsError returns err as an *Error, wrapping unknown errors as KindInternal.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Kind: KindInternal, Message: err.Error()}
}
