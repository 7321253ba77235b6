package netio

// runOffloop answers a fleet route that is not cheap (rendering metrics)
// on a goroutine, through the exchange:
// the connection is busy meanwhile, so pipelined requests wait and
// responses stay in order, exactly as for a session. At most
// cap(s.offloop) such answers are computed at once; others wait on their
// goroutine, never on the loop. Loop-only.
func (c *conn) runOffloop(t *tracked, fn offloopFunc, query, body []byte) {
	s := c.srv
	c.beginExchange()
	if fn == nil {
		t.Respond(404, contentTypeJSON, nil, appendErrorBody(nil, dialectOpenAI, 404, "not_found", "Unknown route."))
		return
	}
	body = append([]byte(nil), body...)
	query = append([]byte(nil), query...)
	go func() {
		s.offloop <- struct{}{}
		status, ct, out := fn(s, query, body)
		<-s.offloop
		t.Respond(status, ct, nil, out)
	}()
}
