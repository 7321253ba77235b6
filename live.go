package vajra

// Live is what a server holds at one moment: the figures that return to
// their idle values once every client has gone, so that a soak (soak/) or
// an embedding program can tell a leak from load. Connections, Running,
// Waiting and StoredResponses are also on /metrics (vajra_open_connections,
// vllm:num_requests_running, vllm:num_requests_waiting,
// vajra_responses_store_count); InFlight and Sessions are not.
type Live struct {
	// Connections is the number of open client connections.
	Connections int64
	// InFlight is the number of exchanges in flight in the network layer:
	// sessions, requests parked for admission, off-loop answers.
	InFlight int64
	// Sessions is the number of live session actors (one per generation
	// request, from its start until its actor stopped).
	Sessions int64
	// Running and Waiting are the engine's requests running and waiting.
	Running, Waiting int
	// KVBlocksUsed is the engine's KV blocks in use (cached prefixes
	// included, so it need not return to 0).
	KVBlocksUsed int
	// StoredResponses is the number of Responses API objects held.
	StoredResponses int64
}

// Live returns the server's live figures. Each is read atomically, but
// not all at one instant. Safe for concurrent use.
func (s *Server) Live() Live {
	st := s.eng.Stats()
	return Live{
		Connections:     s.net.OpenConnections(),
		InFlight:        s.net.InFlight(),
		Sessions:        s.sessions.Active(),
		Running:         st.Running,
		Waiting:         st.Waiting,
		KVBlocksUsed:    st.KVBlocksUsed,
		StoredResponses: s.sessions.StoreStats().Count,
	}
}
