package actors

import "github.com/vajra-go/vajra/engine"

// The connection-local chain of the Responses API over WebSocket. OpenAI
// keeps a connection's most recent response in memory, so that a turn can
// continue from it with previous_response_id even when it was not stored
// (store: false, Zero Data Retention): the reason agents run over a
// WebSocket at all. Vajra keeps, per connection, the latest unstored
// response of each lane (a lane is one conversation when the client
// multiplexes them), at most maxWSPending lanes' worth: the conversation a
// previous_response_id naming it continues, as a stored record's history
// would be. A stored response is chained through the store as over HTTP;
// an unstored one is never visible to GET, and is forgotten with its
// connection.

// wsRecent is one unstored response a connection keeps to chain from.
type wsRecent struct {
	id      string
	history []engine.Message // full capacity: an append copies
	seq     uint64           // when it was kept, for eviction
}

// wsRecents is a connection's latest unstored response per lane. It is the
// connection actor's own: not safe for concurrent use.
type wsRecents struct {
	byLane map[string]*wsRecent
	seq    uint64
}

// put keeps r as lane's latest, evicting the oldest lane's past
// maxWSPending.
func (c *wsRecents) put(lane string, r *wsRecent) {
	if c.byLane == nil {
		c.byLane = map[string]*wsRecent{}
	}
	if _, ok := c.byLane[lane]; !ok && len(c.byLane) >= maxWSPending {
		oldest := ""
		for l, x := range c.byLane {
			if oldest == "" || x.seq < c.byLane[oldest].seq {
				oldest = l
			}
		}
		delete(c.byLane, oldest)
	}
	c.seq++
	r.seq = c.seq
	c.byLane[lane] = r
}

// find returns the kept response id, or nil. Any lane's: a new lane may
// fork another's conversation.
func (c *wsRecents) find(id string) *wsRecent {
	if id == "" {
		return nil
	}
	for _, r := range c.byLane {
		if r.id == id {
			return r
		}
	}
	return nil
}

// wsHistory returns the conversation of the connection-local response id,
// for a create over WebSocket whose previous_response_id names one its
// connection kept (the Responses dialect's decode then needs no store
// lookup). Runs in the session actor.
func (r *Request) wsHistory(id string) ([]engine.Message, bool) {
	if r.ws == nil || r.ws.prev == nil || r.ws.prev.id != id {
		return nil, false
	}
	return r.ws.prev.history, true
}

// wsStreamEnding keeps an unstored response's conversation for its
// connection, when the session's request came over WebSocket: called by
// the session with the final Result, before the stream's last frames (and
// so the exchange's end, after which the connection's actor reads it).
// A failed response is not kept (nothing to continue).
func (ss *session) wsStreamEnding(res *engine.Result) {
	d, ok := ss.d.(*responsesDialect)
	if ss.req.ws == nil || !ok || res.Err != nil || d.req.StoreEnabled() {
		return
	}
	ss.req.ws.last = &wsRecent{id: d.id, history: d.conversation(ss, res)}
}

// conversation is the history a turn continuing the finished response res
// starts from: its input (without its instructions, which do not carry
// over) and its answer. The store's record keeps the same (record), and so
// does a connection's unstored chain.
func (d *responsesDialect) conversation(ss *session, res *engine.Result) []engine.Message {
	msgs := ss.ereq.Messages
	if d.req.Instructions != "" && len(msgs) > 0 {
		msgs = msgs[1:] // instructions do not carry over to the next turn
	}
	h := make([]engine.Message, len(msgs), len(msgs)+1)
	copy(h, msgs)
	if len(res.Choices) > 0 {
		h = append(h, assistantTurn(d.id, &res.Choices[0]))
	}
	return h
}
