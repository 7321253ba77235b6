package actors

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
)

// dialect is one API's side of a session: it decodes and validates the body
// into the engine request, decides the stream's constant parts and builds
// its formatter, encodes the non-streamed body, and renders errors in the
// API's shape. A dialect value belongs to one session.
type dialect interface {
	// decode fills ss.ereq from ss.req.Body, or says why it cannot.
	decode(ss *session) *apiError
	// stream readies a streamed response: it completes ss.ereq.StreamInfo
	// (the session set Model and Chunked; the dialect sets Dialect, ID,
	// Created and its own fields) and returns the stream's Go frame writer,
	// built from those same values, so that an engine that formats with it
	// and one that writes its own frames from StreamInfo agree.
	stream(ss *session) engine.Formatter
	// appendResponse appends the non-streamed body of a finished request.
	appendResponse(dst []byte, ss *session, res *engine.Result) []byte
	// appendError appends the error body in the API's shape.
	appendError(dst []byte, e *apiError) []byte
	// appendStreamError appends the in-stream error event that ends a
	// stream the session must end itself (it failed after the 200), and
	// the end of the body. It uses what the session knows, never the
	// engine's Formatter: the engine may write its own frames, and may be
	// using its Formatter on its own goroutine still.
	appendStreamError(dst []byte, ss *session, e *engine.Error) []byte
	// engineError maps an engine error to the API's error.
	engineError(e *engine.Error, req *engine.Request) *apiError
	streamContentType() string
}

// errPending is what decode returns when the dialect took the request
// over: it waits for a reply (the response store's) that the session hands
// to its receive, or it has answered already. It then ends the request
// itself: session.proceed, session.fail or session.finish.
var errPending = &apiError{Status: 500, Type: "server_error", Message: "pending"}

// receiver is a dialect that gets messages other than the session's own
// (replies from the response store). receive runs in the session actor.
type receiver interface {
	receive(ss *session, ctx actor.Context)
}

// finish answers a request the dialect handled itself (no engine session)
// and stops the session. Runs in the session actor (also from decode).
func (ss *session) finish(status int, body []byte) {
	ss.finished = true
	ss.conn.Respond(status, contentTypeJSON, nil, body)
	if !ss.stopped {
		ss.stopped = true
		ss.owner.root.Stop(ss.self)
	}
}

// newSession allocates a session together with its endpoint's dialect, in
// one allocation.
func newSession(ep Endpoint) *session {
	switch ep {
	case EndpointChatCompletions:
		ss, _ := sessionWith[chatDialect]()
		return ss
	case EndpointCompletions:
		ss, _ := sessionWith[completionsDialect]()
		return ss
	case EndpointResponses:
		ss, _ := sessionWith[responsesDialect]()
		return ss
	case EndpointMessages:
		ss, _ := sessionWith[messagesDialect]()
		return ss
	case EndpointCountTokens:
		ss, _ := sessionWith[countTokensDialect]()
		return ss
	case EndpointTokenize:
		ss, _ := sessionWith[tokenizeDialect]()
		return ss
	case EndpointDetokenize:
		ss, _ := sessionWith[detokenizeDialect]()
		return ss
	case EndpointEmbeddings:
		ss, _ := sessionWith[embeddingsDialect]()
		return ss
	case EndpointResponseGet, EndpointResponseDelete, EndpointResponseCancel, EndpointResponseInputItems:
		ss, d := sessionWith[responseOpDialect]()
		d.op = ep
		return ss
	}
	return &session{d: unknownDialect{}}
}

// sessionWith returns a zero session and its zero dialect D, allocated
// together, with the session's d set.
func sessionWith[D any, PD interface {
	*D
	dialect
}]() (*session, PD) {
	x := &struct {
		s session
		d D
	}{}
	x.s.d = PD(&x.d)
	return &x.s, &x.d
}

// idCounter makes response ids unique within the process; the prefix makes
// them unique across restarts.
var idCounter atomic.Uint64

var idPrefix = strconv.FormatInt(time.Now().UnixNano()&0xffffffffff, 36)

// newID returns prefix + a process-unique suffix, e.g. "chatcmpl-k3j2-1f".
func newID(prefix string) string {
	var buf [64]byte
	return string(appendID(buf[:0], prefix))
}

func appendID(dst []byte, prefix string) []byte {
	dst = append(dst, prefix...)
	dst = append(dst, idPrefix...)
	return strconv.AppendUint(dst, idCounter.Add(1), 36)
}

// idBuf holds a response id in the memory of the dialect that owns it, so
// that the id costs no allocation of its own: for ids that do not outlive
// their session (a stored response's id would keep the whole session
// reachable; those stay newID's copies). 24 bytes hold the longest prefix
// here ("chatcmpl-", 9), the process prefix (at most 8) and the counter up
// to 36^7 (78 billion ids); a longer id moves to the heap (appendID's
// append), still correct.
type idBuf [24]byte

// newID is newID formatted into b: the string is a view of b, which is
// never written again (a dialect is not reused).
func (b *idBuf) newID(prefix string) string {
	s := appendID(b[:0], prefix)
	return unsafe.String(unsafe.SliceData(s), len(s))
}

// responseID names a chat or completions response as vLLM does: prefix
// and the client's X-Request-Id, else the body's request_id (bodyID; the
// result is a copy, bodyID may view the body), else a new id in b.
func responseID(b *idBuf, prefix string, req *Request, bodyID string) string {
	switch {
	case req.ClientRequestID:
		return prefix + req.RequestID
	case bodyID != "":
		return prefix + bodyID
	}
	return b.newID(prefix)
}

// openaiError turns the codegen error into the session's error.
func openaiError(e openai.APIError) *apiError {
	return &apiError{Status: e.Status(), Type: e.Kind.Type(), Code: e.Code, Param: e.Param, Message: e.Message}
}

// openaiDecodeError turns an OpenAI request decoder's error into the
// session's error: a parameter's own error as codegen words it, anything
// else (malformed JSON) a plain 400 that does not quote the body.
func openaiDecodeError(err error) *apiError {
	var pe *openai.ParamError
	if errors.As(err, &pe) {
		return openaiError(pe.API())
	}
	return &apiError{Status: 400, Type: "invalid_request_error", Message: "The body is not valid JSON."}
}

// engineParams renames the parameter an engine error blames ("messages",
// "max_tokens": the chat names) to the endpoint's own names. e is copied
// when renamed, never changed.
func engineParams(e *engine.Error, prompt, maxTokens string) *engine.Error {
	var p string
	switch e.Param {
	case "messages":
		p = prompt
	case "max_tokens":
		p = maxTokens
	default:
		return e
	}
	c := *e
	c.Param = p
	return &c
}

func appendOpenAIError(dst []byte, e *apiError) []byte {
	return openai.AppendErrorBody(dst, e.Status, e.Type, e.Code, e.Param, e.Message)
}

// chatDialect is POST /v1/chat/completions.
type chatDialect struct {
	// dec is the decoded request, from chatRequests until the engine has
	// started: a held stream does not keep it.
	dec     *chatDecoded
	id      string
	idBuf   idBuf
	created int64
	fmt     openai.ChatFormatter
}

func (d *chatDialect) decode(ss *session) *apiError {
	d.dec = chatRequests.Get().(*chatDecoded)
	// The messages' contents are views of the body, kept until started.
	if err := openai.DecodeChatRequestView(ss.req.Body, &d.dec.req); err != nil {
		return openaiDecodeError(err)
	}
	ss.owner.reportUnknown(ss.req.Endpoint, d.dec.req.Unknown)
	ss.ereq.Messages = d.dec.msgs[:0]
	if pe := d.dec.req.ToEngine(&ss.ereq); pe != nil {
		return openaiError(pe.API())
	}
	d.id = responseID(&d.idBuf, "chatcmpl-", ss.req, d.dec.req.RequestID)
	d.created = time.Now().Unix()
	return nil
}

// started drops the decoded request, the prompt's messages and the body
// their contents are views of: the engine reads Messages and Tools only
// until Start returns (engine.Request), and what the rest of a chat
// session needs (id, model, created, the formatter) is kept apart.
func (d *chatDialect) started(ss *session) {
	d.dec.reset(ss.ereq.Messages)
	chatRequests.Put(d.dec)
	d.dec = nil
	ss.ereq.Messages, ss.ereq.Tools = nil, nil
	ss.req.release()
}

// viewsBody implements bodyViewer.
func (*chatDialect) viewsBody() {}

// chatDecoded is a decoded chat request with its engine messages, reused
// through chatRequests: the slices keep their capacity, so that a request
// like the last costs no allocation for them. A request that fails before
// its engine starts leaves its decoded copy to the collector.
type chatDecoded struct {
	req  openai.ChatRequest
	msgs []engine.Message
}

// maxPooledMessages bounds the message slices a pooled chatDecoded keeps:
// a conversation of thousands of turns is not kept for every later request.
const maxPooledMessages = 64

// reset empties dec for reuse, keeping msgs (the request's engine
// messages) and the decoded slices' capacity when they are small.
func (dec *chatDecoded) reset(msgs []engine.Message) {
	clear(msgs)
	if cap(msgs) > maxPooledMessages {
		msgs = nil
	}
	dec.msgs = msgs[:0]
	m, unk := dec.req.Messages, dec.req.Unknown
	clear(m)
	clear(unk)
	if cap(m) > maxPooledMessages {
		m = nil
	}
	dec.req = openai.ChatRequest{Messages: m[:0], Unknown: unk[:0]}
}

var chatRequests = sync.Pool{New: func() any { return new(chatDecoded) }}

func (d *chatDialect) stream(ss *session) engine.Formatter {
	o := d.dec.req.ChatStreamOptions()
	o.Framing = ss.framing
	o.NoTokenData = o.NoReasoning && ss.owner.parsesOutput
	si := &ss.ereq.StreamInfo
	si.Dialect, si.ID, si.Created = engine.DialectChat, d.id, d.created
	si.IncludeUsage, si.ContinuousUsage = o.IncludeUsage, o.IncludeUsage && o.ContinuousUsage
	d.fmt.Reset(si.ID, si.Model, si.Created, o)
	return &d.fmt
}

func (d *chatDialect) appendResponse(dst []byte, ss *session, res *engine.Result) []byte {
	m := openai.ChatCompletionMeta{ID: d.id, Model: ss.ereq.Model, Created: d.created, Logprobs: ss.ereq.Sampling.Logprobs,
		TokenIDs: ss.ereq.ReturnTokenIDs, NoReasoning: ss.ereq.HideReasoning,
		NoTokenData: ss.ereq.HideReasoning && ss.owner.parsesOutput}
	return openai.AppendChatCompletion(dst, &m, res)
}

func (d *chatDialect) appendError(dst []byte, e *apiError) []byte { return appendOpenAIError(dst, e) }

func (d *chatDialect) appendStreamError(dst []byte, ss *session, e *engine.Error) []byte {
	ae := openai.FromEngineError(e, "messages")
	return ae.AppendStreamError(dst, ss.framing)
}

func (d *chatDialect) engineError(e *engine.Error, _ *engine.Request) *apiError {
	return openaiError(openai.FromEngineError(e, "messages"))
}

func (d *chatDialect) streamContentType() string { return "text/event-stream" }

// unknownDialect refuses: netio routes only endpoints that have a dialect.
type unknownDialect struct{}

func (unknownDialect) decode(*session) *apiError {
	return &apiError{Status: 404, Type: "not_found_error", Message: "Unknown endpoint."}
}
func (unknownDialect) stream(*session) engine.Formatter { return nil }
func (unknownDialect) appendResponse(dst []byte, _ *session, _ *engine.Result) []byte {
	return dst
}
func (unknownDialect) appendError(dst []byte, e *apiError) []byte { return appendOpenAIError(dst, e) }
func (unknownDialect) appendStreamError(dst []byte, _ *session, _ *engine.Error) []byte {
	return dst // never streams
}
func (unknownDialect) engineError(e *engine.Error, _ *engine.Request) *apiError {
	return openaiError(openai.FromEngineError(e, ""))
}
func (unknownDialect) streamContentType() string { return "text/event-stream" }
