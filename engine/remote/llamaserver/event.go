package llamaserver

//go:generate go tool easyjson -no_std_marshalers event.go

import (
	"errors"

	"github.com/mailru/easyjson/jlexer"

	"github.com/vajra-go/vajra/engine/remote"
)

// event is one /completion stream event as far as the client reads it
// (llama-server's server_task_result_cmpl_partial and _final, the
// non-OpenAI form), decoded by easyjson (event_easyjson.go, generated;
// the project's JSON codec): every slice is reused from event to event.
//
//	{"index":0,"content":"…","tokens":[42],"stop":false,"id_slot":0,
//	 "tokens_predicted":1,"tokens_evaluated":7,
//	 "completion_probabilities":[{"id":42,"token":"…","bytes":[…],
//	   "logprob":-0.1,"top_logprobs":[{"id":42,"token":"…","bytes":[…],"logprob":-0.1},…]}]}
//
// The final event has "stop":true, "stop_type" ("eos", "limit", "word"),
// "tokens_evaluated" and "timings" {"cache_n": prompt tokens reused}. An
// error after the status line is {"error":{"code":500,"message":…,"type":…}}.
//
//easyjson:json
type event struct {
	// Content is the raw (still escaped) JSON string, quotes included: a
	// view of the input, unescaped only where it is needed (content).
	Content   rawJSON   `json:"content"`
	Tokens    []int32   `json:"tokens"`
	Stop      bool      `json:"stop"`
	StopType  stopType  `json:"stop_type"`
	Predicted int       `json:"tokens_predicted"`
	Evaluated int       `json:"tokens_evaluated"`
	Probs     probs     `json:"completion_probabilities"`
	Timings   timings   `json:"timings"`
	Error     errorBody `json:"error"`
}

// timings is the final event's timings, of which the client reads the
// prompt tokens served from the slot's cache.
//
//easyjson:json
type timings struct {
	CacheN int `json:"cache_n"`
}

type stopType uint8

const (
	stopNone stopType = iota
	stopEOS
	stopLimit
	stopWord
)

// UnmarshalEasyJSON reads llama-server's stop_type without allocating;
// an unknown one is stopNone.
func (t *stopType) UnmarshalEasyJSON(in *jlexer.Lexer) {
	switch in.UnsafeString() {
	case "eos":
		*t = stopEOS
	case "limit":
		*t = stopLimit
	case "word":
		*t = stopWord
	default:
		*t = stopNone
	}
}

// rawJSON keeps a value's raw bytes, a view of the input.
type rawJSON []byte

// UnmarshalEasyJSON implements easyjson.Unmarshaler.
func (r *rawJSON) UnmarshalEasyJSON(in *jlexer.Lexer) { *r = in.Raw() }

// content appends the event's content, unescaped, to dst (nothing when it
// is not a string). Called only for the events that need the text (tokens
// llama-server held back, min_tokens' continuation): it may allocate for
// a string with escapes.
func (ev *event) content(dst []byte) []byte {
	if len(ev.Content) < 2 || ev.Content[0] != '"' {
		return dst
	}
	l := jlexer.Lexer{Data: ev.Content}
	s := l.UnsafeBytes()
	if l.Error() != nil {
		return dst
	}
	return append(dst, s...)
}

// errorBody is an error event's error: an object (code, message), or any
// other value, taken as a message-less error.
type errorBody struct {
	has  bool
	code int
	msg  []byte
}

// UnmarshalEasyJSON implements easyjson.Unmarshaler.
func (e *errorBody) UnmarshalEasyJSON(in *jlexer.Lexer) {
	e.has = true
	if in.IsNull() || in.CurrentToken() != jlexer.TokenDelim {
		e.msg = append(e.msg[:0], "error"...)
		in.Skip()
		return
	}
	in.Delim('{')
	for !in.IsDelim('}') {
		key := in.UnsafeFieldName(false)
		in.WantColon()
		switch key {
		case "code":
			e.code = in.Int()
		case "message":
			e.msg = append(e.msg[:0], in.UnsafeBytes()...)
		default:
			in.SkipRecursive()
		}
		in.WantComma()
	}
	in.Delim('}')
}

// probs is completion_probabilities: each token's logprob and its
// alternatives, kept in slices reused from event to event (one arena for
// every token's alternatives), so that decoding allocates nothing once
// they have grown. easyjson's generated code would make each element's
// top_logprobs anew.
type probs struct {
	logprobs []float32
	top      [][]remote.TopLogprob
	arena    []remote.TopLogprob
}

func (p *probs) reset() {
	p.logprobs, p.top, p.arena = p.logprobs[:0], p.top[:0], p.arena[:0]
}

// UnmarshalEasyJSON implements easyjson.Unmarshaler.
func (p *probs) UnmarshalEasyJSON(in *jlexer.Lexer) {
	p.reset()
	if in.IsNull() {
		in.Skip()
		return
	}
	in.Delim('[')
	for !in.IsDelim(']') {
		at := len(p.arena)
		var lp float32
		in.Delim('{')
		for !in.IsDelim('}') {
			key := in.UnsafeFieldName(false)
			in.WantColon()
			switch key {
			case "logprob":
				lp = in.Float32()
			case "top_logprobs":
				p.readTop(in)
			default:
				in.SkipRecursive()
			}
			in.WantComma()
		}
		in.Delim('}')
		in.WantComma()
		p.logprobs = append(p.logprobs, lp)
		p.top = append(p.top, p.arena[at:len(p.arena):len(p.arena)])
	}
	in.Delim(']')
}

// readTop appends one token's top_logprobs to the arena.
func (p *probs) readTop(in *jlexer.Lexer) {
	if in.IsNull() {
		in.Skip()
		return
	}
	in.Delim('[')
	for !in.IsDelim(']') {
		var t remote.TopLogprob
		in.Delim('{')
		for !in.IsDelim('}') {
			key := in.UnsafeFieldName(false)
			in.WantColon()
			switch key {
			case "id":
				t.TokenID = in.Int32()
			case "logprob":
				t.Logprob = in.Float32()
			default:
				in.SkipRecursive()
			}
			in.WantComma()
		}
		in.Delim('}')
		in.WantComma()
		p.arena = append(p.arena, t)
	}
	in.Delim(']')
}

// reset clears ev for the next event, keeping its slices' capacity.
func (ev *event) reset() {
	ev.Content, ev.Tokens = nil, ev.Tokens[:0]
	ev.Stop, ev.StopType = false, stopNone
	ev.Predicted, ev.Evaluated = 0, 0
	ev.Probs.reset()
	ev.Timings = timings{}
	ev.Error.has, ev.Error.code, ev.Error.msg = false, 0, ev.Error.msg[:0]
}

// errSyntax is a stream event that is not the JSON llama-server writes.
var errSyntax = errors.New("llamaserver: malformed stream event")

// parser decodes events with one reused lexer.
type parser struct{ l jlexer.Lexer }

func newParser() *parser { return &parser{} }

// parse reads the JSON object b into ev. b and ev's slices stay valid
// until the next parse.
func (p *parser) parse(b []byte, ev *event) error {
	ev.reset()
	p.l = jlexer.Lexer{Data: b}
	if p.l.IsNull() || p.l.CurrentToken() != jlexer.TokenDelim {
		// An event is an object: not null, not a scalar.
		return errSyntax
	}
	ev.UnmarshalEasyJSON(&p.l)
	p.l.Consumed()
	if p.l.Error() != nil {
		return errSyntax
	}
	return nil
}
