package actors

// startRealtime serves GET /v1/realtime. Not yet built: the connection is
// closed with 1011.
func (s *Sessions) startRealtime(conn WSConn, _ *WSRequest) WSHandle {
	conn.Close(1011, "realtime is not served yet")
	return closedWS{}
}
