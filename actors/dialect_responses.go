package actors

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/store"
)

// responsesDialect is POST /v1/responses. A request with
// previous_response_id first asks the response store for that response
// (decode returns errPending; the reply comes to receive) and continues with
// its conversation as history. A response with store (the default) is put
// in the store once it is complete, by the session from the final Result
// (whoever wrote the stream's frames): from appendResponse for a
// non-streamed one, from streamEnded for a streamed one, both before the
// client can see the end, so the client's next request finds it. Failed
// and incomplete responses are stored too, with their status (a failed
// non-streamed one from errorEnded: its client got the error body). A
// background one (background: true) runs in its session past its HTTP
// exchange and is stored by it (background.go): build sets ss.bg.
type responsesDialect struct {
	req     openai.ResponsesRequest
	id      string
	created int64
	meta    openai.ResponseMeta
	history []engine.Message
	lookup  store.Request
	fmt     openai.ResponsesFormatter
	// nextSeq is the sequence_number after the last event the session
	// forwarded: the number of an error event the session writes itself.
	nextSeq int
}

func (d *responsesDialect) decode(ss *session) *apiError {
	if err := openai.DecodeResponsesRequest(ss.req.Body, &d.req); err != nil {
		return openaiDecodeError(err)
	}
	ss.owner.reportUnknown(ss.req.Endpoint, d.req.Unknown)
	d.id = newID("resp_")
	d.created = time.Now().Unix()
	if h, ok := ss.req.wsHistory(d.req.PreviousResponseID); ok { // an unstored response of its WebSocket (responses_ws_chain.go)
		d.history = h
		return d.build(ss)
	}
	if d.req.PreviousResponseID != "" {
		d.lookup = store.Request{Op: store.Lookup, ID: d.req.PreviousResponseID, ReplyTo: ss.self}
		ss.owner.store.Ask(&d.lookup)
		return errPending
	}
	return d.build(ss)
}

// receive gets the store's answer about previous_response_id.
func (d *responsesDialect) receive(ss *session, ctx actor.Context) {
	reply, ok := ctx.Message().(*store.Reply)
	if !ok || d.lookup.ReplyTo == nil {
		return
	}
	d.lookup.ReplyTo = nil
	if reply.Err != nil {
		ss.fail(ctx, storeUnavailable(reply.Err))
		return
	}
	if reply.Rec == nil {
		ss.fail(ctx, &apiError{Status: 400, Type: "invalid_request_error", Code: "previous_response_not_found",
			Param: "previous_response_id", Message: "Previous response with id " + quoteID(d.req.PreviousResponseID) + " not found."})
		return
	}
	if !openai.ResponseStatusFinal(reply.Rec.Status) {
		ss.fail(ctx, &apiError{Status: 400, Type: "invalid_request_error", Code: openai.CodeInvalidValue,
			Param: "previous_response_id", Message: "Previous response with id " + quoteID(d.req.PreviousResponseID) + " is still in progress."})
		return
	}
	d.history = reply.Rec.History
	if ae := d.build(ss); ae != nil {
		ss.fail(ctx, ae)
		return
	}
	ss.proceed(ctx)
}

// build validates the request and fills the engine request. A background
// one takes a place among Store.MaxBackground (background.go).
func (d *responsesDialect) build(ss *session) *apiError {
	if pe := d.req.ToEngine(&ss.ereq, d.history); pe != nil {
		return openaiError(pe.API())
	}
	d.meta = d.req.Meta(d.id, d.created)
	if d.req.Background {
		ss.bg = newBackground(d, ss.owner.cfg.Store.MaxEventLogBytes)
		if !ss.owner.reserveBackground(ss) {
			ss.bg = nil
			return &apiError{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded",
				Message: "Too many background responses are running (" + strconv.Itoa(ss.owner.cfg.Store.MaxBackground) + "); retry when one has finished."}
		}
	}
	return nil
}

// stream decides the stream's constant parts: d.meta holds the same id,
// creation time and model (build made it from the same request).
func (d *responsesDialect) stream(ss *session) engine.Formatter {
	si := &ss.ereq.StreamInfo
	si.Dialect, si.ID, si.Created, si.FirstSequence = engine.DialectResponses, d.id, d.created, 0
	d.nextSeq = si.FirstSequence
	d.fmt.Reset(d.meta, ss.framing)
	d.fmt.SetSequence(si.FirstSequence)
	return &d.fmt
}

// sent notes where the forwarded stream stopped (streamWatcher): frames
// hold whole events, the last of which carries the highest number.
func (d *responsesDialect) sent(frames []byte) {
	if n, ok := openai.LastSequenceNumber(frames); ok {
		d.nextSeq = n + 1
	}
}

func (d *responsesDialect) appendResponse(dst []byte, ss *session, res *engine.Result) []byte {
	mark := len(dst)
	dst = openai.AppendResponse(dst, openai.BuildResponse(&d.meta, res))
	d.save(ss, res, dst[mark:])
	return dst
}

// streamEnded saves a finished stream's response (streamEnder): the same
// object the non-streamed body would be, built from the final Result, so
// it does not matter what wrote the stream's frames. Its completed_at is
// the session's clock now, which is the stream's end to the second.
func (d *responsesDialect) streamEnded(ss *session, res *engine.Result) {
	d.saveResult(ss, res)
}

// errorEnded saves a non-streamed response that failed after Start
// (errorEnder): its client gets the error body, the store the failed
// response object, as OpenAI keeps it.
func (d *responsesDialect) errorEnded(ss *session, res *engine.Result) {
	d.saveResult(ss, res)
}

// saveResult encodes the response object of res and saves it.
func (d *responsesDialect) saveResult(ss *session, res *engine.Result) {
	if !d.storing(res) {
		return
	}
	ss.body = openai.AppendResponse(ss.takeBody(), openai.BuildResponse(&d.meta, res))
	d.save(ss, res, ss.body)
	ss.releaseBody()
}

// appendSaveFailed replaces the terminal event of a stream's last frames
// with response.failed, code response_store_unavailable, at the same
// sequence_number (saveFailer): the response the client asked to store
// could not be saved.
func (d *responsesDialect) appendSaveFailed(frames []byte, ss *session, err error) []byte {
	rest, seq, ok := openai.CutTerminalEvent(frames, ss.framing)
	if !ok {
		seq = d.nextSeq
		if n, found := openai.LastSequenceNumber(frames); found {
			seq = n + 1
		}
	}
	ae := storeUnavailable(err)
	return openai.AppendResponseFailedCode(rest, &d.meta, ss.framing, seq, ae.Code, ae.Message)
}

func (d *responsesDialect) appendStreamError(dst []byte, ss *session, e *engine.Error) []byte {
	return openai.AppendResponseFailed(dst, &d.meta, ss.framing, d.nextSeq, e)
}

// storing says whether the finished response res goes in the store: the
// request asked for storing (the default). Failed, incomplete and
// cancelled responses are stored with their status, as OpenAI keeps them.
func (d *responsesDialect) storing(*engine.Result) bool {
	return d.req.StoreEnabled()
}

// save puts the finished response, encoded in body, in the store when
// storing says so. body is copied. Runs in the session actor.
func (d *responsesDialect) save(ss *session, res *engine.Result, body []byte) {
	if !d.storing(res) {
		return
	}
	rec := d.record(ss, res, slices.Clone(body))
	rec.Size = store.RecordSize(rec)
	ss.saveWith(rec)
}

// record is the stored record of the finished response res, encoded in
// body (kept, not copied): its status, input items and the conversation
// for the next previous_response_id. The caller sets size.
func (d *responsesDialect) record(ss *session, res *engine.Result, body []byte) *store.Record {
	return &store.Record{ID: d.id, Status: openai.ResultStatus(res), Background: d.req.Background, Body: body,
		Input: d.req.InputItems(d.id), History: d.conversation(ss, res)}
}

// assistantTurn is the history turn of response respID's choice c. A call
// the engine gave no id gets the call_id its output item has
// (engine.ItemID by the item's output index, after the reasoning and
// message items, as BuildResponse numbers them), so that the next turn's
// function_call_output, which quotes that call_id, pairs with it.
func assistantTurn(respID string, c *engine.Choice) engine.Message {
	m := engine.Message{Role: "assistant", Content: c.Text}
	first := 0 // output index of the first call
	if c.Reasoning != "" {
		first++
	}
	if c.Text != "" {
		first++
	}
	for i, tc := range c.ToolCalls {
		if tc.ID == "" {
			tc.ID = engine.ItemID(engine.ItemCallID, respID, first+i)
		}
		m.ToolCalls = append(m.ToolCalls, tc)
	}
	return m
}

func (d *responsesDialect) appendError(dst []byte, e *apiError) []byte {
	return appendOpenAIError(dst, e)
}

func (d *responsesDialect) engineError(e *engine.Error, _ *engine.Request) *apiError {
	return openaiError(openai.FromEngineError(engineParams(e, "input", "max_output_tokens"), "input"))
}

func (d *responsesDialect) streamContentType() string { return "text/event-stream" }

// quoteID renders an id from the client for an error message: quoted,
// escaped and cut short, so nothing the client sent is echoed raw.
func quoteID(id string) string {
	const max = 64
	if len(id) > max {
		id = id[:max]
	}
	return "'" + strings.Trim(strconv.Quote(id), `"`) + "'"
}
