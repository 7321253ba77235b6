package actors

// startResponsesWS serves the Responses API over WebSocket. Not yet built:
// the connection is closed with 1011.
func (s *Sessions) startResponsesWS(conn WSConn, _ *WSRequest) WSHandle {
	conn.Close(1011, "the Responses API over WebSocket is not served yet")
	return closedWS{}
}
