// Package remote is an engine.Engine over engine workers that run in other
// processes or on other machines: vLLM and SGLang through their
// token-in/token-out gRPC services, llama.cpp's llama-server over HTTP.
// The worker does the forward passes and the KV cache; this package does
// what a front door can: the chat template, tokenization, detokenization,
// stop strings, tool-call and reasoning parsing (engine/text), usage and
// the frames (the request's Formatter).
//
// Each protocol is a Client (this file): one long-lived connection per
// worker that multiplexes its requests, and a receive loop that hands each
// chunk of token ids to a Receiver on the goroutine that received it, where
// the engine turns them into frames. The protocol clients live in their own
// packages (remote/vllm, remote/sglang, remote/llamaserver) and import this
// one for the types below; this package imports none of them (the binary's
// root registers them by URL scheme).
package remote

import (
	"context"
	"errors"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/pipeline"
)

// Client speaks one protocol to one worker. Safe for concurrent use.
type Client interface {
	// Generate starts one request on the worker. It returns once the
	// worker accepted the stream, or with an error: a *WorkerError whose
	// Retryable says whether another worker may take the request (nothing
	// of it has reached the client yet). After a nil error the client's
	// receive goroutine calls rx.Tokens for each chunk and rx.End exactly
	// once, also after Abort, Close or a broken connection. A protocol
	// whose worker answers only once it has the first token (llama-server
	// sends its status line after the prefill) returns at once, before
	// the worker answered, and reports a refusal in End instead.
	Generate(ctx context.Context, g *Generate, rx Receiver) (Call, error)

	// Info asks the worker what it serves (GetModelInfo, /props).
	Info(ctx context.Context) (*Info, error)

	// Health asks the worker whether it can take requests now.
	Health(ctx context.Context) error

	// Load asks the worker for its own load figures (GetLoads, /slots).
	Load(ctx context.Context) (Load, error)

	// TokenizerFiles fetches the worker's tokenizer files by name
	// (tokenizer.json, tokenizer_config.json, ...: GetTokenizer), or
	// fails with ErrUnsupported when the protocol has none.
	TokenizerFiles(ctx context.Context) (map[string][]byte, error)

	// Close ends every call (each gets its End with an error) and the
	// connection. Idempotent.
	Close() error
}

// Call is one request in flight on a worker.
type Call interface {
	// Abort tells the worker to stop the request and free its slot (an
	// Abort RPC, or closing the request's connection), at once. Safe for
	// concurrent use; idempotent. End still comes.
	Abort()
}

// ChoiceAborter is a Call that can stop one choice of an n > 1 request
// (the engine ended it: a stop string, a stop token) while the others go
// on. Safe for concurrent use; idempotent. A Call without it is aborted
// whole once every choice has ended.
type ChoiceAborter interface {
	AbortChoice(choice int)
}

// Generate is one request as a worker receives it: the prompt's token ids
// and the sampling parameters. It is read during Generate only.
type Generate struct {
	// ID is unique among the calls in flight (the worker's request id,
	// which Abort names).
	ID string
	// Prompt holds the prompt's token ids, as the remote engine rendered
	// and tokenized it.
	Prompt []int32
	// Sampling is the request's, with N choices. Every field is sent to
	// the worker explicitly: proto3's zero values are not the engines'
	// defaults. Stop strings are the remote engine's (engine/text, with
	// hold-back): a client does not send them, so that every worker stops
	// alike; StopTokenIDs it sends.
	Sampling *engine.Sampling
	// MaxTokens is the resolved cap per choice (never 0).
	MaxTokens int
	// MinTokens is vLLM's min_tokens (0 = none).
	MinTokens int
	// Constraint is the structured-output constraint, when any.
	Constraint Constraint
	// PromptLogprobs asks for prompt logprobs (completions with echo), as
	// engine.Request.PromptLogprobs.
	PromptLogprobs int
	// EOSTokenIDs are the model's end-of-generation ids, the tokenizer's
	// EOS first, then generation_config.json's eos_token_id: for a worker
	// that knows no tokenizer (vLLM's engine core) and stops on nothing
	// it is not told. Shared: read only.
	EOSTokenIDs []int32
	// CachePrompt lets the worker reuse its cached prefix (always true but
	// where a test asks otherwise).
	CachePrompt bool
	// BadWords are the request's bad words as token sequences, each
	// banned whole (pipeline.Prepared.BadWords); AllowedTokenIDs and
	// Priority are the request's (engine.VLLMExtensions), as is
	// CacheSalt. Only a worker whose Info.Supports them gets them.
	BadWords        [][]int32
	AllowedTokenIDs []int
	Priority        int
	CacheSalt       string
	// SessionID is the request's session (engine.VLLMExtensions): vLLM's
	// engine core names it in its KV cache events; workers that publish
	// none ignore it.
	SessionID string
	// ExtraArgs are the request's vllm_xargs (engine.VLLMExtensions), a
	// JSON object, for a worker whose Info.Supports engine.CapExtraArgs.
	ExtraArgs []byte
}

// ConstraintKind says what a Constraint's Value holds.
type ConstraintKind uint8

const (
	ConstraintNone ConstraintKind = iota
	// ConstraintJSONObject: any JSON object (Value empty).
	ConstraintJSONObject
	// ConstraintJSONSchema: Value is a JSON Schema.
	ConstraintJSONSchema
	// ConstraintGrammar: Value is a GBNF grammar (llama.cpp's), which the
	// remote engine builds for forced tool calls (engine/text/grammar).
	ConstraintGrammar
)

// Constraint is a structured-output constraint a worker enforces.
type Constraint struct {
	Kind  ConstraintKind
	Value string
	// EBNF enforces the same constraint as a grammar in xgrammar's
	// dialect, the default backend of vLLM and SGLang, which those clients
	// send in place of Value: a JSON schema (or any JSON object) as
	// llama.cpp's converter turns it into a grammar, with bounded
	// whitespace. Their own JSON-schema grammars allow whitespace without
	// limit, which a weak model fills until max_tokens; this way every
	// worker's output takes the same shape (a regex or a list of choices
	// comes as a grammar too). Set by Prepare for every kind.
	EBNF string
}

// Receiver takes a call's output on the client's receive goroutine. Its
// methods must not block: they format frames and hand them on. The client
// never calls them concurrently for one call (a client that reads the
// choices of one call on several goroutines serializes them), and may
// call them before Generate has returned.
type Receiver interface {
	// Tokens delivers one chunk of one choice's new tokens. c and every
	// slice in it are valid only during the call: the client reuses them.
	Tokens(c *Chunk)
	// End is called once per call, after its last Tokens.
	End(e *End)
}

// Chunk is one choice's new tokens in one message from the worker.
type Chunk struct {
	Choice   int
	TokenIDs []int32
	// Logprobs has one entry per token of TokenIDs when logprobs were
	// asked for; Top[i] the alternatives of token i (TopLogprobs of them).
	Logprobs []float32
	Top      [][]TopLogprob
	// PromptTokens and CachedTokens, when the worker reports them here
	// (0 when it does so only at the end).
	PromptTokens int
	CachedTokens int
	// PromptLogprobs for the prompt (with echo), in the first chunk only.
	PromptLogprobs []engine.TokenLogprob
	// Missing counts tokens the worker generated before TokenIDs but did
	// not name (llama-server streams no id for a token whose text ends in
	// an incomplete UTF-8 character: the next event carries only the last
	// token's id). Text is then the text of all of them, as the worker
	// detokenized it, which the engine uses instead of the pieces of
	// TokenIDs. Both are zero otherwise.
	Missing int
	Text    []byte
}

// TopLogprob is one alternative token with its logprob.
type TopLogprob = pipeline.TopLogprob

// End ends a call: each choice's finish, the usage the worker counted, or
// the failure.
type End struct {
	// Choices holds one entry per choice, by index.
	Choices []ChoiceEnd
	// PromptTokens and CachedTokens as the worker counted them.
	PromptTokens int
	CachedTokens int
	// Err is nil when the worker finished the request; a *WorkerError
	// otherwise (the connection broke, the worker failed or refused it,
	// a timeout).
	Err error
}

// ChoiceEnd is how the worker ended one choice.
type ChoiceEnd struct {
	// FinishReason is the worker's: "stop" (EOS or a stop token),
	// "length", "abort" or "error".
	FinishReason     string
	MatchedTokenID   int32 // the stop token that ended it, or -1
	CompletionTokens int
}

// Info is what a worker serves.
type Info struct {
	ServedModelName  string
	ModelPath        string
	MaxContextLength int
	VocabSize        int
	EOSTokenIDs      []int32
	BOSTokenID       int32 // -1 when none
	// Embeddings says the worker serves embeddings.
	Embeddings bool
	// ChatTemplate is the worker's chat template, when it reports one
	// (llama-server's /props); "" otherwise.
	ChatTemplate string
	// PromptLogprobs says the worker returns prompt logprobs (completions
	// with echo and logprobs); the engine refuses such a request before
	// the 200 otherwise.
	PromptLogprobs bool
	// Supports lists the optional capabilities the worker has, of
	// engine.CapBadWords, CapAllowedTokenIDs, CapPriority and CapCacheSalt; the engine
	// refuses a request that needs another before the 200.
	Supports engine.Capability
	// Slots is the number of requests the worker runs at once (its slots
	// or max running requests), 0 when unknown.
	Slots int
}

// Load is a worker's own report of its load.
type Load struct {
	Running  int
	Waiting  int
	KVUsage  float64 // 0..1
	Capacity int     // slots or max running requests, 0 when unknown
	// PrefixQueries and PrefixHits count the prompt tokens the worker
	// looked up in its prefix cache and found, since it started (0 when
	// the protocol does not say: only vLLM's engine core does).
	PrefixQueries, PrefixHits uint64
}

// WorkerError is a failure of a worker or of the way to it.
type WorkerError struct {
	// Worker is the worker's URL.
	Worker string
	// Status is the worker's HTTP status or gRPC code mapped to HTTP
	// (503 unavailable, 429 overloaded, 400 refused, 504 timeout), 0
	// when the connection itself failed.
	Status int
	// Retryable says the request may go to another worker: nothing of
	// it reached the client and the worker refused or could not be
	// reached.
	Retryable bool
	Message   string
	Err       error
}

func (e *WorkerError) Error() string {
	if e.Err != nil {
		return "remote: " + e.Worker + ": " + e.Message + ": " + e.Err.Error()
	}
	return "remote: " + e.Worker + ": " + e.Message
}

func (e *WorkerError) Unwrap() error { return e.Err }

// ErrUnsupported is returned by a Client for what its protocol lacks.
var ErrUnsupported = errors.New("remote: not supported by this worker's protocol")
