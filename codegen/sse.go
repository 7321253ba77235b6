package codegen

// BeginEvent begins a frame (BeginFrame) holding one named event and writes
// its start up to the end of the data object's "type" member. Over SSE:
//
//	event: <typ>\ndata: {"type":"<typ>"
//
// Over WebSocket an event is the bare JSON object, one text frame each:
//
//	{"type":"<typ>"
//
// typ is written as is: it must be a constant event name, never client text.
// The caller appends the other members, then ends the event with EndEvent.
func BeginEvent(dst []byte, f Framing, typ string) ([]byte, int) {
	dst, mark := BeginFrame(dst, f)
	if f != FramingWebSocket {
		dst = append(dst, "event: "...)
		dst = append(dst, typ...)
		dst = append(dst, "\ndata: "...)
	}
	dst = append(dst, "{\"type\":\""...)
	dst = append(dst, typ...)
	return append(dst, '"'), mark
}

// EndEvent closes the data object of an event begun with BeginEvent, ends
// the SSE event (a blank line; nothing over WebSocket) and its frame.
func EndEvent(dst []byte, f Framing, mark int) []byte {
	if f == FramingWebSocket {
		dst = append(dst, '}')
	} else {
		dst = append(dst, "}\n\n"...)
	}
	return EndFrame(dst, f, mark)
}
