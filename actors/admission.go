package actors

// Admitter gives the generation requests that no HTTP exchange carries (the
// creates of a Responses API WebSocket: responses_ws.go) the server's
// admission control: a permit from the same pool as HTTP requests, a place
// in the same FIFO queue, the same refusals and the same in-flight count a
// drain waits for. The module root wires netio's (netio.Server.Admit, in
// netio/admission.go beside the permits and the queue) with
// Sessions.SetAdmitter; without one, such requests start at once.
type Admitter interface {
	// Admit runs start, which starts the request's session and returns its
	// Handle, once the request has a permit: at once, on the caller's
	// goroutine, or later, on the goroutine that frees a permit (start
	// must not block). A refusal (draining, queue full) is an error for
	// engine.AsError, and start never runs then. Safe for concurrent use.
	Admit(start func() Handle) (Admission, error)
}

// Admission is one admitted request's hold on admission control.
type Admission interface {
	// Cancel withdraws the request: false when it was still waiting (its
	// start never runs), true when its session was told (ConnClosed).
	// Idempotent.
	Cancel() (ran bool)
	// End returns the request's permit and its place in the in-flight
	// count, once the request is over (or never started). Idempotent.
	End()
}

// SetAdmitter sets the admission control of the requests no HTTP exchange
// carries. Call it before the first WebSocket connection is served.
func (s *Sessions) SetAdmitter(a Admitter) { s.admitter = a }
