package actors

import (
	"sync"
	"time"
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
// event loop; the session owns it from StartSession on and releases it when
// it stops.
type Request struct {
	Endpoint  Endpoint
	RequestID string
	// Body is the request body, in a pooled buffer (see NewRequest).
	Body []byte
	// Chunked says the response body may use chunked framing (HTTP/1.1);
	// otherwise a stream is close-delimited.
	Chunked bool
	Arrival time.Time

	buf *[]byte // pooled backing of Body
}

var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// NewRequest returns a Request whose Body is a pooled copy of body.
// Safe for concurrent use.
func NewRequest(ep Endpoint, requestID string, body []byte) *Request {
	bp := bodyPool.Get().(*[]byte)
	*bp = append((*bp)[:0], body...)
	return &Request{Endpoint: ep, RequestID: requestID, Body: *bp, buf: bp}
}

// release returns the body's buffer to the pool. The request must not be
// used afterwards.
func (r *Request) release() {
	if r.buf == nil {
		return
	}
	if cap(*r.buf) <= maxPooledBody {
		bodyPool.Put(r.buf)
	}
	r.buf, r.Body = nil, nil
}

// maxPooledBody keeps one huge request from pinning its buffer in the pool.
const maxPooledBody = 1 << 20
