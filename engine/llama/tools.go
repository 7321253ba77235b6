package llama

// Forced tool calls. tool_choice "required" or a named function is
// enforced as vLLM does it: with a grammar (grammar.ForToolChoice),
// independent of the model's own tool-call syntax and of
// --tool-call-parser; text.Forced turns the output into tool calls.

// forcedTool is how one request's choices are forced to call.
type forcedTool struct {
	name string // the named function; "" for required
}

// feedForced takes a forced choice's token text.
func (s *scheduler) feedForced(q *seq, piece []byte) {
	q.events = q.forced.Feed(q.events[:0], piece)
	s.emit(q, q.events)
}

// finishForced ends a forced choice: its calls, and for a required call
// their frames (or its text as content when the array did not parse).
func (s *scheduler) finishForced(q *seq) {
	q.events = q.forced.Finish(q.events[:0])
	s.emit(q, q.events)
}
