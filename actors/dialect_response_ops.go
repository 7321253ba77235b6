package actors

import (
	"bytes"
	"net/url"
	"slices"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
)

// responseOpDialect serves the stored-response routes: GET, DELETE,
// POST .../cancel and GET .../input_items of /v1/responses/{id}. Each runs
// as a short session: decode asks the response store, the reply comes to
// receive, which answers. No engine session is started.
//
// Request.Body is not the HTTP body: netio puts "{id}?{raw query}" there
// (AppendResponseOpBody).
type responseOpDialect struct {
	op    Endpoint
	id    string
	query url.Values
	ask   storeRequest
	body  []byte
}

// AppendResponseOpBody appends the Request.Body of a stored-response route:
// the response id from the path and the raw query. Safe for concurrent use.
func AppendResponseOpBody(dst, id, query []byte) []byte {
	dst = append(dst, id...)
	dst = append(dst, '?')
	return append(dst, query...)
}

func (d *responseOpDialect) decode(ss *session) *apiError {
	id, query, _ := bytes.Cut(ss.req.Body, []byte{'?'})
	d.id = string(id)
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
	op := storeGet
	if d.op == EndpointResponseDelete {
		op = storeDelete
	}
	d.ask = storeRequest{op: op, id: d.id, replyTo: ss.self}
	ss.owner.store.ask(&d.ask)
	return errPending
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
	reply, ok := ctx.Message().(*storeReply)
	if !ok || d.ask.replyTo == nil {
		return
	}
	d.ask.replyTo = nil
	if reply.err != nil {
		ss.fail(ctx, storeUnavailable(reply.err))
		return
	}
	rec := reply.rec
	if rec == nil {
		ss.fail(ctx, &apiError{Status: 404, Type: "invalid_request_error",
			Message: "Response with id " + quoteID(d.id) + " not found."})
		return
	}
	switch d.op {
	case EndpointResponseGet:
		ss.finish(200, rec.body)
	case EndpointResponseDelete:
		d.body = openai.AppendResponseDeleted(d.body[:0], rec.id)
		ss.finish(200, d.body)
	case EndpointResponseCancel:
		// Only background responses can be cancelled, and Vajra runs none:
		// a stored response has always finished.
		ss.fail(ctx, &apiError{Status: 400, Type: "invalid_request_error",
			Message: "Cannot cancel a response that is not in progress."})
	case EndpointResponseInputItems:
		limit, asc, after, _ := d.page()
		items := rec.input
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
