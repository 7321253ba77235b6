package actors

import (
	"strconv"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
)

// The Responses API over WebSocket (GET /v1/responses with Upgrade, as
// openai-go's client.Responses.Connect dials it): one actor per upgraded
// connection. Each response.create client event runs as an ordinary
// Responses API request, a session of EndpointResponses whose body is the
// create's parameters with "stream":true (responses_ws_event.go) and whose
// Conn is a wsExchange (responses_ws_conn.go), so everything a POST
// /v1/responses does (validation, previous_response_id, store, usage,
// metrics) it does the same way, with no copy.
//
// Lanes: creates with the same stream_id (none is a lane too) run one at a
// time, in the order they came (OpenAI: "Requests with the same stream_id
// are processed FIFO"); different lanes run at once, their events
// interleaved whole, each carrying its stream_id. A closed connection
// aborts every running response's engine session at once and drops the
// queued ones. An unstored response can be continued on its connection
// (responses_ws_chain.go).

// maxWSPending bounds the creates one connection may have running or
// queued, across its lanes (and so the lanes themselves): 64, openai-go's
// default MaxLanes. A create past it gets a 429 error event.
const maxWSPending = 64

// maxWSQueuedBytes bounds the bodies of the creates one connection has
// queued behind a running one in their lanes (a running create's body is
// released once decoded): 64 creates of up to --max-ws-message-bytes each
// would otherwise hold a gigabyte. A create past it gets a 429 error event.
const maxWSQueuedBytes = 32 << 20

// maxWSScratch bounds the scratch buffer the actor keeps between client
// events: a huge create does not pin its size for the connection's life.
const maxWSScratch = 64 << 10

// responsesWS is the actor of one Responses API WebSocket connection.
type responsesWS struct {
	wsBase // spawn, serve, stop, panics, the inbox (base.go, ws.go)

	lanes   map[string]*wsLane
	recent  wsRecents // the lanes' latest unstored responses (responses_ws_chain.go)
	pending int       // creates running or queued
	queued  int       // bytes of the queued creates' bodies
	n       uint64    // creates seen, for their request ids
	gone    bool      // the connection closed (or is closing): close ran
	// body holds the create being built; out the actor's own events.
	body []byte
	out  []byte
}

// wsLane is the creates of one stream_id: the running one and the ones
// waiting for it, in order.
type wsLane struct {
	id      string
	running *wsExchange
	queue   []wsQueued
}

// wsQueued is a create waiting in its lane.
type wsQueued struct {
	req        *Request
	previousID string
}

var _ WSBacklog = (*responsesWS)(nil)

// startResponsesWS spawns the actor of one upgraded connection. Loop-only
// caller (StartWS); never blocks.
func (s *Sessions) startResponsesWS(conn WSConn, req *WSRequest) WSHandle {
	ws := &responsesWS{lanes: map[string]*wsLane{}}
	// The connection's actor counts as a live session (Active, Wait),
	// beside the sessions of its creates: a leaked one shows.
	ws.spawnWS(s, ws, conn, req)
	return ws
}

// Receive implements actor.Actor (actorBase.serve).
func (ws *responsesWS) Receive(ctx actor.Context) { ws.serve(ws, ctx) }

func (ws *responsesWS) begin(actor.Context) {}

// receive handles the connection's messages but the base's.
func (ws *responsesWS) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *clientMsg:
		if !ws.gone {
			ws.message(m)
		}
		ws.done(m)
	case *wsExchangeEnded:
		if !ws.gone {
			ws.ended(m.ex)
		}
	}
}

// clientGone runs when the client left: every running response is
// aborted and the queued ones dropped.
func (ws *responsesWS) clientGone(ctx actor.Context) {
	if !ws.gone {
		ws.close()
		ws.stop(ctx)
	}
}

// cleanup runs once when the actor stopped. After a close it only ends the
// count. Otherwise the actor failed (its supervisor stops it) or the
// system is stopping: the running responses are aborted and the client
// told, with 1011.
func (ws *responsesWS) cleanup() {
	if !ws.gone {
		ws.close()
		ws.conn.Close(1011, "the session failed")
	}
}

// message handles one client event: a valid response.create starts or
// queues a response in its lane; anything else gets an error event.
func (ws *responsesWS) message(m *clientMsg) {
	ev, body, ae := parseCreate(m.p, ws.body[:0])
	streamID := ev.streamID
	ws.body = body[:0]
	if cap(ws.body) > maxWSScratch {
		ws.body = nil
	}
	lane := ws.lanes[streamID]
	switch {
	case ae != nil:
	case ws.pending >= maxWSPending:
		ae = &apiError{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded",
			Message: "Too many responses running or queued on this connection (limit " + strconv.Itoa(maxWSPending) + "); wait for one to end."}
	case lane != nil && ws.queued+len(body) > maxWSQueuedBytes:
		ae = &apiError{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded",
			Message: "Too many bytes of responses queued on this connection (limit " + strconv.Itoa(maxWSQueuedBytes>>20) + " MiB); wait for one to end."}
	}
	if ae != nil {
		ws.refuse(ae, streamID)
		return
	}
	ws.n++
	req := NewRequest(EndpointResponses, ws.req.RequestID+"-"+strconv.FormatUint(ws.n, 10), body)
	req.Arrival = m.arrival
	ws.pending++
	q := wsQueued{req: req, previousID: ev.previousID}
	if lane == nil {
		lane = &wsLane{id: streamID}
		ws.lanes[streamID] = lane
		ws.run(lane, q)
		return
	}
	// A lane in the map has a running create (ended drops idle lanes).
	lane.queue = append(lane.queue, q)
	ws.queued += len(req.Body)
}

// refuse sends the error event of a client event that starts nothing.
func (ws *responsesWS) refuse(ae *apiError, streamID string) {
	if ce := ws.owner.log.Check(zap.DebugLevel, "websocket client event refused"); ce != nil {
		ce.Write(zap.String("request_id", ws.req.RequestID), zap.String("code", ae.Code), zap.String("param", ae.Param))
	}
	eb := appendOpenAIError(ws.body[:0], ae)
	ws.out = appendWSErrorEvent(ws.out[:0], ae.Status, eb, streamID)
	ws.body = eb[:0]
	ws.conn.Send(ws.out)
}

// run starts q as the lane's running response. A previous_response_id that
// names one of the connection's unstored responses is resolved now, when
// the create runs: a create queued behind the response it continues finds
// it.
//
// With the server's admission control (Sessions.SetAdmitter) the create
// takes a permit as an HTTP request does, and may wait for one in the same
// queue (its lane waits with it); a refusal is its error event, and the
// lane goes on.
func (ws *responsesWS) run(lane *wsLane, q wsQueued) {
	ex := &wsExchange{ws: ws, lane: lane, streamID: lane.id, prev: ws.recent.find(q.previousID)}
	ex.ended.ex = ex
	lane.running = ex
	q.req.ws = ex
	adm := ws.owner.admitter
	if adm == nil {
		ex.handle = ws.owner.Start(ex, q.req)
		return
	}
	a, err := adm.Admit(func() Handle { return ws.owner.Start(ex, q.req) })
	if err != nil {
		q.req.release()
		ex.done.Store(true)
		ws.refuse(openaiError(openai.FromEngineError(engine.AsError(err), "input")), lane.id)
		ws.ended(ex)
		return
	}
	ex.admission, ex.req = a, q.req
}

// ended starts the next create of an exchange's lane, or drops the lane.
func (ws *responsesWS) ended(ex *wsExchange) {
	lane := ex.lane
	if lane.running != ex {
		return
	}
	lane.running = nil
	ws.pending--
	if ex.admission != nil {
		ex.admission.End() // first, so that the lane's next create may take the permit
	}
	if ex.last != nil {
		ws.recent.put(lane.id, ex.last)
	}
	if len(lane.queue) == 0 {
		delete(ws.lanes, lane.id)
		return
	}
	q := lane.queue[0]
	lane.queue[0] = wsQueued{}
	lane.queue = lane.queue[1:]
	ws.queued -= len(q.req.Body)
	ws.run(lane, q)
}

// close aborts every running response (their sessions abort their engine
// sessions and stop) and drops the queued ones.
func (ws *responsesWS) close() {
	if ws.gone {
		return
	}
	ws.gone = true
	for id, lane := range ws.lanes {
		switch ex := lane.running; {
		case ex == nil:
		case ex.admission != nil:
			// Cancel tells a started session (ConnClosed) or takes a
			// waiting create out of the admission queue.
			if !ex.admission.Cancel() {
				ex.req.release() // never started
			}
			ex.admission.End()
			ex.done.Store(true)
		case !ex.done.Swap(true):
			ex.handle.ConnClosed()
		}
		for _, q := range lane.queue {
			q.req.release()
		}
		delete(ws.lanes, id)
	}
	ws.pending, ws.queued = 0, 0
}
