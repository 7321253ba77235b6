package actors

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/store"
)

// responseOpDialect serves the stored-response routes: GET, DELETE,
// POST .../cancel and GET .../input_items of /v1/responses/{id}. Each runs
// as a short session: decode asks the response store, the reply comes to
// receive, which answers. No engine session is started.
//
// A background response still running is the store's live entry: GET,
// cancel and GET ?stream=true go on to the session that runs it
// (background.go), which answers here. A GET ?stream=true it takes over
// makes this session a follower: the background session streams to this
// session's connection, and this session stays until that stream ends
// (bgDone) to tell it when the client leaves (bgUnsubscribe).
//
// Request.Body is not the HTTP body: netio puts "{id}?{raw query}\n{body}"
// there (AppendResponseOpBody).
type responseOpDialect struct {
	op    Endpoint
	id    string
	query url.Values
	ask   store.Request
	body  []byte
	// resume: GET ?stream=true (or {"stream":true} in the body, as
	// openai-go's GetStreaming sends it), from after starting_after.
	resume streamAsk
	// follow is the background session streaming to this connection.
	follow *actor.PID
	unsub  bgUnsubscribe
}

// AppendResponseOpBody appends the Request.Body of a stored-response route:
// the response id from the path, the raw query and the HTTP body (GET may
// carry {"stream":true}). Safe for concurrent use.
func AppendResponseOpBody(dst, id, query, body []byte) []byte {
	dst = append(dst, id...)
	dst = append(dst, '?')
	dst = append(dst, query...)
	dst = append(dst, '\n')
	return append(dst, body...)
}

// getOptions is what GET /v1/responses/{id} reads of a JSON body.
type getOptions struct {
	Stream        *bool `json:"stream"`
	StartingAfter *int  `json:"starting_after"`
}

func (d *responseOpDialect) decode(ss *session) *apiError {
	id, rest, _ := bytes.Cut(ss.req.Body, []byte{'?'})
	query, jbody, _ := bytes.Cut(rest, []byte{'\n'})
	d.id = string(id)
	if d.op == EndpointResponseGet {
		if ae := d.getOptions(ss, query, jbody); ae != nil {
			return ae
		}
	}
	if d.op == EndpointResponseInputItems {
		q, err := url.ParseQuery(string(query))
		if err != nil {
			return &apiError{Status: 400, Type: "invalid_request_error", Code: openai.CodeInvalidValue,
				Message: "The query string is malformed."}
		}
		d.query = q
		if _, _, _, ae := d.page(); ae != nil {
			return ae
		}
	}
	op := store.Get
	switch d.op {
	case EndpointResponseDelete:
		op = store.Delete
	case EndpointResponseCancel:
		op = store.Cancel
	case EndpointResponseInputItems:
		op = store.Lookup
	}
	d.ask = store.Request{Op: op, ID: d.id, ReplyTo: ss.self}
	if d.resume.conn != nil {
		d.ask.Stream = &d.resume // for the background session (streamAsk)
	}
	ss.owner.store.Ask(&d.ask)
	return errPending
}

// getOptions reads GET's stream and starting_after, from the query
// (OpenAI's documented form) or a JSON body (openai-go's GetStreaming sends
// {"stream":true} and starting_after in the query).
func (d *responseOpDialect) getOptions(ss *session, query, jbody []byte) *apiError {
	q, err := url.ParseQuery(string(query))
	if err != nil {
		return &apiError{Status: 400, Type: "invalid_request_error", Code: openai.CodeInvalidValue,
			Message: "The query string is malformed."}
	}
	var o getOptions
	if len(bytes.TrimSpace(jbody)) > 0 {
		if err := json.Unmarshal(jbody, &o); err != nil {
			return &apiError{Status: 400, Type: "invalid_request_error", Message: "The body is not valid JSON."}
		}
	}
	stream := o.Stream != nil && *o.Stream
	switch v := q.Get("stream"); v {
	case "":
	case "true", "1":
		stream = true
	case "false", "0":
		stream = false
	default:
		return &apiError{Status: 400, Type: "invalid_request_error", Code: openai.CodeInvalidValue, Param: "stream",
			Message: "'stream' must be true or false."}
	}
	after := -1
	if o.StartingAfter != nil {
		after = *o.StartingAfter
	}
	if v := q.Get("starting_after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return &apiError{Status: 400, Type: "invalid_request_error", Code: openai.CodeInvalidValue, Param: "starting_after",
				Message: "'starting_after' must be a sequence_number (an integer, 0 or more)."}
		}
		after = n
	}
	if stream {
		d.resume = streamAsk{conn: ss.conn, chunked: ss.req.Chunked, after: after}
	}
	return nil
}

// Bounds of input_items paging, OpenAI's.
const (
	defaultItemsLimit = 20
	maxItemsLimit     = 100
)

// page reads input_items' paging parameters: limit (1..100, default 20),
// order ("asc" or "desc", default "desc"), after (an item id).
func (d *responseOpDialect) page() (limit int, asc bool, after string, ae *apiError) {
	limit = defaultItemsLimit
	if v := d.query.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxItemsLimit {
			return 0, false, "", &apiError{Status: 400, Type: "invalid_request_error", Code: openai.CodeInvalidValue, Param: "limit",
				Message: "'limit' must be an integer from 1 to 100."}
		}
		limit = n
	}
	switch d.query.Get("order") {
	case "", "desc":
	case "asc":
		asc = true
	default:
		return 0, false, "", &apiError{Status: 400, Type: "invalid_request_error", Code: openai.CodeInvalidValue, Param: "order",
			Message: "'order' must be \"asc\" or \"desc\"."}
	}
	return limit, asc, d.query.Get("after"), nil
}

func (d *responseOpDialect) receive(ss *session, ctx actor.Context) {
	if _, done := ctx.Message().(*bgDone); done {
		// The followed stream ended, and with it the exchange.
		ss.finished = true
		ss.stop(ctx)
		return
	}
	reply, ok := ctx.Message().(*store.Reply)
	if !ok || d.ask.ReplyTo == nil {
		return
	}
	d.ask.ReplyTo = nil
	if reply.Err != nil {
		ss.fail(ctx, storeUnavailable(reply.Err))
		return
	}
	if reply.Elsewhere {
		ss.fail(ctx, runningElsewhere(d.id))
		return
	}
	if ae, ok := reply.Refusal.(*apiError); ok {
		ss.fail(ctx, ae)
		return
	}
	if reply.From != nil {
		d.follow = reply.From // it streams to our connection now
		return
	}
	rec := reply.Rec
	if rec == nil {
		ss.fail(ctx, &apiError{Status: 404, Type: "invalid_request_error",
			Message: "Response with id " + quoteID(d.id) + " not found."})
		return
	}
	switch d.op {
	case EndpointResponseGet:
		if d.resume.conn != nil {
			d.replay(ss, ctx, rec)
			return
		}
		ss.finish(200, rec.Body)
	case EndpointResponseDelete:
		if reply.Live {
			ss.fail(ctx, &apiError{Status: 400, Type: "invalid_request_error",
				Message: "Response with id " + quoteID(d.id) + " is still in progress: cancel it first."})
			return
		}
		d.body = openai.AppendResponseDeleted(d.body[:0], rec.ID)
		ss.finish(200, d.body)
	case EndpointResponseCancel:
		// Only background responses can be cancelled. A finished one (or
		// one cancelled just now, answered by its session) is answered
		// unchanged: cancelling is idempotent, as OpenAI documents.
		if !rec.Background {
			ss.fail(ctx, &apiError{Status: 400, Type: "invalid_request_error",
				Message: "Cannot cancel a synchronous response."})
			return
		}
		ss.finish(200, rec.Body)
	case EndpointResponseInputItems:
		limit, asc, after, _ := d.page()
		items := rec.Input
		if !asc {
			items = slices.Clone(items) // the record is shared: reverse a copy
			slices.Reverse(items)
		}
		if after != "" {
			if i := slices.IndexFunc(items, func(it openai.ResponseItem) bool { return it.ID == after }); i >= 0 {
				items = items[i+1:]
			}
		}
		more := len(items) > limit
		if more {
			items = items[:limit]
		}
		d.body = openai.AppendInputItemsList(d.body[:0], items, more)
		ss.finish(200, d.body)
	}
}

// replay streams a finished background response's kept events after
// starting_after and ends the stream.
func (d *responseOpDialect) replay(ss *session, ctx actor.Context, rec *store.Record) {
	if !rec.Background {
		ss.fail(ctx, &apiError{Status: 400, Type: "invalid_request_error", Code: openai.CodeInvalidValue, Param: "stream",
			Message: "Only background responses can be streamed again; response " + quoteID(d.id) + " was not created with background: true."})
		return
	}
	events, ok := openai.EventsAfter(rec.Events, d.resume.after)
	if !ok {
		ss.fail(ctx, eventsGone(d.resume.after, rec.FirstSeq))
		return
	}
	ss.finished = true
	ss.conn.StartStream("text/event-stream", nil)
	p := events
	if d.resume.chunked {
		d.body = appendChunk(d.body[:0], events, true)
		p = d.body
	}
	ss.conn.EndStream(p)
	ss.stop(ctx)
}

// connClosed tells the followed background session the client left
// (closeWatcher): directly, or through the store while the stream request
// is still on its way (bgUnsubscribe).
func (d *responseOpDialect) connClosed(ss *session) {
	d.unsub = bgUnsubscribe{id: d.id, conn: ss.conn}
	switch {
	case d.follow != nil:
		ss.owner.root.Send(d.follow, &d.unsub)
		d.follow = nil
	case d.resume.conn != nil && d.ask.ReplyTo != nil:
		ss.owner.store.Forward(d.id, &d.unsub)
	}
}

func (d *responseOpDialect) stream(*session) engine.Formatter { return nil }

func (d *responseOpDialect) appendStreamError(dst []byte, _ *session, _ *engine.Error) []byte {
	return dst // never streams
}

func (d *responseOpDialect) appendResponse(dst []byte, _ *session, _ *engine.Result) []byte {
	return dst
}

func (d *responseOpDialect) appendError(dst []byte, e *apiError) []byte {
	return appendOpenAIError(dst, e)
}

func (d *responseOpDialect) engineError(e *engine.Error, _ *engine.Request) *apiError {
	return openaiError(openai.FromEngineError(e, ""))
}

func (d *responseOpDialect) streamContentType() string { return "application/json" }
