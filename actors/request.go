package actors

import (
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vajra-go/vajra/codegen"
)

// Endpoint names a generation API that runs in a session actor.
type Endpoint uint8

const (
	EndpointChatCompletions Endpoint = iota + 1
	EndpointCompletions
	EndpointResponses
	EndpointMessages
	EndpointCountTokens
	// The stored-response routes of the Responses API. Their Request.Body
	// is not a JSON body but "{id}?{query}" (see ResponseOpBody).
	EndpointResponseGet
	EndpointResponseDelete
	EndpointResponseCancel
	EndpointResponseInputItems
	// EndpointInProcess is an in-process request (inproc.go): no HTTP.
	EndpointInProcess
	// vLLM's /tokenize and /detokenize (dialect_tokenize.go): they
	// generate nothing and answer from decode.
	EndpointTokenize
	EndpointDetokenize
	// The WebSocket endpoints (ws.go): one session per upgraded
	// connection, fed client messages by netio. GET /v1/realtime, and the
	// Responses API over WebSocket (GET /v1/responses with Upgrade).
	EndpointRealtime
	EndpointResponsesWS
	// POST /v1/embeddings (dialect_embeddings.go).
	EndpointEmbeddings
)

var endpointNames = [...]string{
	EndpointChatCompletions: "chat_completions",
	EndpointCompletions:     "completions",
	EndpointResponses:       "responses",
	EndpointMessages:        "messages",
	EndpointCountTokens:     "count_tokens",

	EndpointResponseGet:        "response_get",
	EndpointResponseDelete:     "response_delete",
	EndpointResponseCancel:     "response_cancel",
	EndpointResponseInputItems: "response_input_items",
	EndpointInProcess:          "in_process",
	EndpointTokenize:           "tokenize",
	EndpointDetokenize:         "detokenize",
	EndpointRealtime:           "realtime",
	EndpointResponsesWS:        "responses_websocket",
	EndpointEmbeddings:         "embeddings",
}

// String returns the endpoint's metric and log name.
func (e Endpoint) String() string {
	if int(e) < len(endpointNames) && endpointNames[e] != "" {
		return endpointNames[e]
	}
	return "unknown"
}

// Request is what a session needs of its HTTP request, copied out of the
// connection's read buffer so that it outlives it. netio fills it on the
// event loop; the session owns it from StartSession on and releases the
// body as soon as it is decoded.
type Request struct {
	Endpoint  Endpoint
	RequestID string
	// Body is the request body, in a pooled buffer (see NewRequest).
	Body []byte
	// Chunked says the response body may use chunked framing (HTTP/1.1);
	// otherwise a stream is close-delimited.
	Chunked bool
	Arrival time.Time
	// Rank is vLLM's X-data-parallel-rank header (SetRank): with RankSet
	// the request runs only on that data-parallel rank of the engine;
	// RankBad says the header was not an integer.
	Rank             int
	RankSet, RankBad bool
	// Priority is vLLM's X-Vllm-Priority header (SetPriority): with
	// PrioritySet it replaces the body's priority, as in vLLM's front end.
	Priority    int
	PrioritySet bool
	// SessionID is vLLM's X-Session-ID header: the request's session
	// when its body names none (engine.VLLMExtensions.SessionID).
	SessionID string
	// ClientRequestID says RequestID is the client's X-Request-Id (not
	// one the server made up): vLLM names the response by it.
	ClientRequestID bool
	// ws is the exchange of a response.create of the Responses API over
	// WebSocket (responses_ws.go), also the session's Conn; nil for HTTP.
	// The stream's events then go out as WebSocket text frames.
	ws *wsExchange

	buf *[]byte // pooled backing of Body
}

// framing is how the response's stream frames are wrapped: one WebSocket
// text frame per event over WebSocket, in HTTP/1.1 chunks when the request
// allows them, raw (close-delimited) otherwise.
func (r *Request) framing() codegen.Framing {
	if r.ws != nil {
		return codegen.FramingWebSocket
	}
	if r.Chunked {
		return codegen.FramingChunked
	}
	return codegen.FramingRaw
}

// Bodies are copied into pooled buffers of power-of-two size classes from
// 512 bytes to 1 MiB, so that a pooled buffer is never much larger than the
// body it holds (one class for all would keep a 4 KiB buffer for a 700-byte
// body, and the largest body seen for every later one).
const (
	minBodyClass   = 9  // 512 bytes
	maxBodyClass   = 20 // 1 MiB; larger bodies are allocated exactly and not pooled
	numBodyClasses = maxBodyClass - minBodyClass + 1
)

var bodyPools [numBodyClasses]sync.Pool

// bodyClass returns the size class of a body of n bytes, or -1 when it is
// too large to pool.
func bodyClass(n int) int {
	c := bits.Len(uint(max(n, 1)-1)) - minBodyClass
	switch {
	case c < 0:
		return 0
	case c >= numBodyClasses:
		return -1
	}
	return c
}

// NewRequest returns a Request whose Body is a pooled copy of body.
// Safe for concurrent use.
func NewRequest(ep Endpoint, requestID string, body []byte) *Request {
	r := new(Request)
	InitRequest(r, ep, requestID, body)
	return r
}

// SetRank records an X-data-parallel-rank header's value (nil when the
// request has none): an integer, in decimal, as vLLM's front end reads it
// (Python's int: an optional sign, surrounding spaces); anything else
// makes the request a 400 naming the header.
func (r *Request) SetRank(v []byte) {
	if v == nil {
		return
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(v)))
	r.RankSet, r.RankBad, r.Rank = err == nil, err != nil, n
}

// SetPriority records an X-Vllm-Priority header's value (nil when the
// request has none). vLLM's front end reads it with Python's int and
// ignores a value that is not an integer: the body's priority then holds.
func (r *Request) SetPriority(v []byte) {
	if v == nil {
		return
	}
	if n, err := strconv.Atoi(strings.TrimSpace(string(v))); err == nil {
		r.Priority, r.PrioritySet = n, true
	}
}

// SetSessionID records an X-Session-ID header's value (nil or empty: none).
func (r *Request) SetSessionID(v []byte) {
	if len(v) > 0 {
		r.SessionID = string(v)
	}
}

// InitRequest is NewRequest into r, for a caller that keeps the Request
// inside a struct of its own (netio's exchange) to spare the allocation.
// r must not be in use by a session.
func InitRequest(r *Request, ep Endpoint, requestID string, body []byte) {
	*r = Request{Endpoint: ep, RequestID: requestID}
	r.Body, r.buf = pooledCopy(body)
}

// pooledCopy returns a copy of p in a buffer of p's size class, with the
// buffer's pool handle for releasePooled; a p too large to pool is copied
// into memory of its own (and the handle is nil). Safe for concurrent use.
func pooledCopy(p []byte) ([]byte, *[]byte) {
	c := bodyClass(len(p))
	if c < 0 {
		return append([]byte(nil), p...), nil
	}
	bp, _ := bodyPools[c].Get().(*[]byte)
	if bp == nil {
		b := make([]byte, 0, 1<<(c+minBodyClass))
		bp = &b
	}
	*bp = append((*bp)[:0], p...)
	return *bp, bp
}

// releasePooled gives a buffer from pooledCopy back to its pool (nil is
// ignored). Its bytes must not be used after.
func releasePooled(bp *[]byte) {
	if bp != nil {
		bodyPools[bodyClass(cap(*bp))].Put(bp)
	}
}

// release returns the body's buffer to its pool; Body is nil afterwards.
// Idempotent. The session calls it once the body is decoded.
func (r *Request) release() {
	releasePooled(r.buf)
	r.buf, r.Body = nil, nil
}
