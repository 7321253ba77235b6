package text

import (
	"encoding/json"

	"github.com/vajra-go/vajra/engine"
)

// Forced turns the output of one choice that tool_choice forces to call a
// tool (named or required, enforced by the grammar of
// grammar.ForToolChoice) into tool-call events: a named call streams its
// arguments as they come; a required call's JSON array streams each
// element's arguments as they come (see Options.Stream) and is parsed at
// the end (a call per element, or the text as content when it does not
// parse and nothing of it was streamed).
//
// Loop-only, like Parser. The Text of the events points into the Forced's
// buffer: valid until the next Feed, Finish or Reset.
type Forced struct {
	name   string // the named function; "" for required
	stream bool
	dec    UTF8Stream
	out    []byte // the whole output so far
	id     string
	start  bool
	calls  []engine.ToolCall
	text   string
	arr    arrayStream // required, streamed: the array being read
}

// Reset readies f for a choice forced to call name ("" for required);
// stream says events are wanted (a non-streamed request needs only Calls
// and Content).
func (f *Forced) Reset(name string, stream bool) {
	*f = Forced{name: name, stream: stream, out: f.out[:0]}
}

// Feed takes the next raw bytes of the output and appends its events.
func (f *Forced) Feed(dst []Event, piece []byte) []Event {
	n := len(f.out)
	f.out = f.dec.Append(f.out, piece)
	if !f.stream {
		return dst
	}
	if f.name == "" {
		return f.streamArray(dst)
	}
	if !f.start {
		f.start = true
		f.id = NewCallID()
		dst = append(dst, Event{Kind: engine.DeltaToolCallStart, ToolID: f.id, ToolName: f.name})
	}
	if len(f.out) > n {
		dst = append(dst, Event{Kind: engine.DeltaToolCallArgs, Text: f.out[n:len(f.out):len(f.out)]})
	}
	return dst
}

// Finish ends the output and appends its last events: a named call's start
// if it had no output yet, a required call's calls (or its text as content
// when the array did not parse). Call it once per choice.
func (f *Forced) Finish(dst []Event) []Event {
	f.out = f.dec.Flush(f.out)
	if f.name != "" {
		if !f.start {
			f.start = true
			f.id = NewCallID()
			if f.stream {
				dst = append(dst, Event{Kind: engine.DeltaToolCallStart, ToolID: f.id, ToolName: f.name},
					Event{Kind: engine.DeltaToolCallArgs, Text: f.out})
			}
		}
		f.calls = []engine.ToolCall{{ID: f.id, Name: f.name, Arguments: string(f.out)}}
		return dst
	}
	if f.stream {
		dst = f.streamArray(dst)
	}
	var arr []struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(f.out, &arr); err != nil || len(arr) == 0 {
		if args, ok := f.arr.openArgs(f.out); ok {
			// Cut short inside a streamed call: it keeps what was sent.
			f.calls = append(f.calls, engine.ToolCall{ID: f.id, Name: f.arr.as.name, Arguments: string(args)})
		}
		if len(f.calls) > 0 {
			return dst // the streamed calls stand; the rest is dropped
		}
		f.text = string(f.out)
		if f.stream && len(f.out) > 0 {
			dst = append(dst, Event{Kind: engine.DeltaText, Text: f.out})
		}
		return dst
	}
	// The first len(f.calls) calls were streamed and recorded as they closed.
	for i := len(f.calls); i < len(arr); i++ {
		c := &arr[i]
		call := engine.ToolCall{ID: NewCallID(), Name: c.Name, Arguments: string(c.Parameters)}
		f.calls = append(f.calls, call)
		if f.stream {
			dst = append(dst, Event{Kind: engine.DeltaToolCallStart, ToolIndex: i, ToolID: call.ID, ToolName: call.Name},
				Event{Kind: engine.DeltaToolCallArgs, ToolIndex: i, Text: []byte(call.Arguments)})
		}
	}
	return dst
}

// streamArray appends the events of the required call's array so far:
// each element's start once its name and arguments have begun, then its
// arguments as they come. A call is recorded as its element closes.
func (f *Forced) streamArray(dst []Event) []Event {
	for {
		ev, out := f.arr.next(f.out)
		i := len(f.calls)
		switch ev {
		case aeNone:
			return dst
		case aeStart:
			f.id = NewCallID()
			dst = append(dst, Event{Kind: engine.DeltaToolCallStart, ToolIndex: i, ToolID: f.id, ToolName: f.arr.as.name})
		case aeArgs:
			dst = append(dst, Event{Kind: engine.DeltaToolCallArgs, ToolIndex: i, Text: out[:len(out):len(out)]})
		case aeClose:
			f.calls = append(f.calls, engine.ToolCall{ID: f.id, Name: f.arr.as.name, Arguments: string(f.arr.closedArgs(f.out))})
		}
	}
}

// Calls returns the calls made, after Finish (owned by the caller).
func (f *Forced) Calls() []engine.ToolCall { return f.calls }

// Content returns a required call's output that did not parse, after
// Finish; "" otherwise.
func (f *Forced) Content() string { return f.text }
