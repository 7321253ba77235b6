package codegen

// BeginEvent begins a frame (BeginFrame) holding one named SSE event and
// writes its start up to the end of the data object's "type" member:
//
//	event: <typ>\ndata: {"type":"<typ>"
//
// typ is written as is: it must be a constant event name, never client text.
// The caller appends the other members, then "}\n\n", and passes the mark to
// EndFrame.
func BeginEvent(dst []byte, f Framing, typ string) ([]byte, int) {
	dst, mark := BeginFrame(dst, f)
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, typ...)
	return append(dst, '"'), mark
}
