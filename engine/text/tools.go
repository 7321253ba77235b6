package text

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/vajra-go/vajra/engine"
)

// toolKind selects a tool-call parser.
type toolKind uint8

const (
	toolNone    toolKind = iota // all content is text
	toolHermes                  // <tool_call>{json}</tool_call>, repeated
	toolLlama3                  // [<|python_tag|>]{json}; {json}
	toolMistral                 // [TOOL_CALLS][{json}, …] or [TOOL_CALLS]name[ARGS]{json}, repeated
)

// toolParsers maps vLLM's --tool-call-parser names to parsers.
//
// hermes (vLLM Hermes2ProToolParser; Hermes, Qwen2.5/Qwen3 instruct):
// each call is <tool_call>{"name": …, "arguments": {…}}</tool_call>; text
// before the first call is content. A call whose end tag never comes is
// parsed from what there is (vLLM's `<tool_call>(.*)` alternative).
//
// llama3_json and llama4_json (vLLM Llama3JsonToolParser): the content is
// tool calls only when it starts (after optional whitespace) with
// <|python_tag|> or "{": then JSON objects {"name": …, "parameters"|
// "arguments": {…}} separated by ";". Other content is text; a leading
// <|python_tag|> not followed by a call is dropped from it (a control
// token, which vLLM never shows with skip_special_tokens).
//
// mistral (vLLM MistralToolParser): [TOOL_CALLS] followed by a JSON array
// of {"name": …, "arguments": {…}} (tokenizers before v11), or by
// name[ARGS]{…} (v11 and later; "[ARGS]" may be missing, the arguments
// start at the first "{"), the latter repeated with [TOOL_CALLS] before
// each call. Mistral's templates want 9-character alphanumeric call ids
// (mistral-common validates them when the id comes back in a tool message),
// so mistral calls get those, like vLLM's MistralToolCall; other parsers'
// ids are "call_" and 24 alphanumerics.
//
// Common to all: a call's Arguments is the arguments object's JSON text as
// the model wrote it (missing or null arguments are "{}"); a call whose
// JSON is malformed, whose name is not a non-empty string or whose
// arguments are not an object comes out as content, raw and whole, tags
// included (vLLM returns the model output as content then); whitespace
// between and after calls is dropped, other text after a call is content.
var toolParsers = map[string]toolKind{
	"hermes":      toolHermes,
	"llama3_json": toolLlama3,
	"llama4_json": toolLlama3,
	"mistral":     toolMistral,
}

// ToolParsers returns the names of the tool-call parsers, sorted. Safe for
// concurrent use.
func ToolParsers() []string { return sortedKeys(toolParsers) }

func lookupTool(name string) (toolKind, error) {
	if name == "" {
		return toolNone, nil
	}
	k, ok := toolParsers[name]
	if !ok {
		return 0, fmt.Errorf("%w: tool parser %q (known: %s)",
			ErrUnknownParser, name, strings.Join(ToolParsers(), ", "))
	}
	return k, nil
}

// The tags of the tool-call formats.
const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
	pythonTag   = "<|python_tag|>"
	mistralBot  = "[TOOL_CALLS]"
	mistralArgs = "[ARGS]"
)

// maxToolNameBytes bounds a mistral v11 tool name: text after [TOOL_CALLS]
// that has no "{" within this many bytes is not a call, and is released as
// content rather than held to the end of the output. OpenAI limits function
// names to 64 characters; 256 leaves room for other servers' rules.
const maxToolNameBytes = 256

// Call id lengths.
const (
	callIDLen        = 24 // random characters after "call_"
	mistralCallIDLen = 9  // mistral-common requires exactly 9 alphanumerics
)

// toolStage states. Each parser uses its own subset.
const (
	tsText     uint8 = iota // plain text, looking for an opening tag
	tsCall                  // hermes: inside <tool_call>, looking for the end tag
	tsStart                 // llama3: deciding whether the content is calls
	tsAfterTag              // llama3: after <|python_tag|>, expecting "{"
	tsObject                // llama3: inside a call object
	tsSep                   // llama3: after a call, expecting ";" and "{"
	tsPlain                 // llama3: content, unparsed to the end
	tsAfterBot              // mistral: after [TOOL_CALLS]
	tsArray                 // mistral: inside the calls array
	tsName                  // mistral v11: reading the name
	tsArgs                  // mistral v11: inside the arguments object
)

// toolStage finds tool calls in content text. It keeps every byte it has
// not decided on in buf; offsets into buf are rebased when the decided
// prefix is dropped after each piece.
type toolStage struct {
	kind  toolKind
	state uint8
	buf   []byte

	rawStart int // start of the raw text of the call being read (content if it fails)
	mark     int // start of the body, JSON value or name being read
	searched int // hermes: buf is searched for the end tag up to here
	scan     jsonScan
	name     string // mistral v11: the call's name

	afterCall bool // a call was made: whitespace-only text is dropped
	realSeg   bool // the text since the last call has non-space bytes

	// Streaming (Options.Stream): the call object being read, the
	// mistral array being read, and the id of the committed call.
	as  argStream
	arr arrayStream
	cid string
}

func (s *toolStage) reset(k toolKind) {
	*s = toolStage{kind: k, buf: s.buf[:0]}
	if k == toolLlama3 {
		s.state = tsStart
	}
}

func (s *toolStage) feed(p *Parser, text []byte) {
	if s.kind == toolNone {
		p.emit(engine.DeltaText, 0, text)
		return
	}
	if len(text) == 0 {
		return
	}
	s.buf = append(s.buf, text...)
	s.compact(s.run(p, false))
}

func (s *toolStage) finish(p *Parser) {
	if s.kind != toolNone {
		s.run(p, true)
	}
	s.buf = s.buf[:0]
}

// compact drops the decided prefix buf[:n].
func (s *toolStage) compact(n int) {
	if n == 0 {
		return
	}
	s.buf = s.buf[:copy(s.buf, s.buf[n:])]
	s.rawStart = max(s.rawStart-n, 0)
	s.mark = max(s.mark-n, 0)
	s.searched = max(s.searched-n, 0)
}

// run parses buf and returns how much of it is decided. eof says the output
// has ended: nothing may stay held.
func (s *toolStage) run(p *Parser, eof bool) int {
	switch s.kind {
	case toolHermes:
		return s.runHermes(p, eof)
	case toolLlama3:
		return s.runLlama3(p, eof)
	default:
		return s.runMistral(p, eof)
	}
}

// scanText emits the content in buf[from:] up to the next tag (holding a
// partial tag at the end unless eof) and returns the tag's index, or -1,
// and the index up to which buf is decided.
func (s *toolStage) scanText(p *Parser, from int, tag string, eof bool) (at, next int) {
	b := s.buf[from:]
	j := indexString(b, tag)
	end := len(b)
	switch {
	case j >= 0:
		end = j
	case !eof:
		end -= partialSuffix(b, tag)
	}
	seg := b[:end]
	if s.afterCall && !s.realSeg && allSpace(seg) {
		if j < 0 && !eof {
			return -1, from // hold: it is dropped if a call or the end follows
		}
		seg = nil
	} else if len(seg) > 0 {
		s.realSeg = true
	}
	p.emit(engine.DeltaText, 0, seg)
	if j >= 0 {
		return from + j, from + end
	}
	return -1, from + end
}

// made records that a call was made: the text after it starts a new
// segment.
func (s *toolStage) made() { s.afterCall, s.realSeg = true, false }

// rawContent emits a failed call's raw text as content.
func (s *toolStage) rawContent(p *Parser, raw []byte) {
	p.emit(engine.DeltaText, 0, raw)
	s.realSeg = true
}

func (s *toolStage) runHermes(p *Parser, eof bool) int {
	i := 0
	for {
		switch s.state {
		case tsText:
			at, next := s.scanText(p, i, hermesOpen, eof)
			if at < 0 {
				return next
			}
			s.rawStart, s.mark = at, at+len(hermesOpen)
			s.searched, s.state, i = s.mark, tsCall, s.mark
			s.as.reset()
		case tsCall:
			from := max(s.mark, s.searched-len(hermesClose)+1)
			j := indexString(s.buf[from:], hermesClose)
			if j < 0 {
				if !eof {
					s.searched = len(s.buf)
					body := s.buf[s.mark:]
					s.stream(p, body[:len(body)-partialSuffix(body, hermesClose)], callIDLen)
					return s.rawStart
				}
				// Unterminated: vLLM's `<tool_call>(.*)` parses what is there.
				s.stream(p, s.buf[s.mark:], callIDLen)
				s.hermesCall(p, s.buf[s.mark:], s.buf[s.rawStart:])
				s.state = tsText
				return len(s.buf)
			}
			end := from + j
			s.stream(p, s.buf[s.mark:end], callIDLen)
			i = end + len(hermesClose)
			s.hermesCall(p, s.buf[s.mark:end], s.buf[s.rawStart:i])
			s.state = tsText
		}
	}
}

func (s *toolStage) hermesCall(p *Parser, body, raw []byte) {
	if s.endStreamed(p, body) {
		return
	}
	if name, args, ok := parseCall(body); ok {
		p.call(name, args, callIDLen)
		s.made()
		return
	}
	s.rawContent(p, raw)
}

func (s *toolStage) runLlama3(p *Parser, eof bool) int {
	i := 0
	for {
		switch s.state {
		case tsStart:
			j := skipSpace(s.buf, i)
			rest := s.buf[j:]
			switch {
			case len(rest) == 0 || (len(rest) < len(pythonTag) && pythonTag[:len(rest)] == string(rest)):
				if !eof {
					return s.rawStart
				}
				s.state = tsPlain
			case len(rest) >= len(pythonTag) && string(rest[:len(pythonTag)]) == pythonTag:
				// The tag is dropped, whatever follows (in Llama 3.1 a
				// control token, which vLLM's skip_special_tokens leaves
				// out; it also opens built-in tool code).
				s.buf = append(s.buf[:j], s.buf[j+len(pythonTag):]...)
				s.state, s.mark = tsAfterTag, j
			case rest[0] == '{':
				s.startObject(j)
			default:
				s.state = tsPlain
			}
		case tsAfterTag:
			j := skipSpace(s.buf, s.mark)
			switch {
			case j < len(s.buf) && s.buf[j] == '{':
				s.startObject(j)
			case j < len(s.buf) || eof:
				s.state = tsPlain // not calls after all: content
			default:
				return s.rawStart
			}
		case tsObject:
			n := jsonDepth(s.buf[s.mark:], &s.scan)
			if n < 0 {
				s.stream(p, s.buf[s.mark:], callIDLen)
				if !eof {
					return s.rawStart
				}
				if s.endStreamed(p, s.buf[s.mark:]) {
					return len(s.buf)
				}
				s.state = tsPlain
				continue
			}
			end := s.mark + n
			s.stream(p, s.buf[s.mark:end], callIDLen)
			if s.endStreamed(p, s.buf[s.mark:end]) {
				s.state, s.rawStart = tsSep, end
				continue
			}
			if name, args, ok := parseCall(s.buf[s.mark:end]); ok {
				p.call(name, args, callIDLen)
				s.made()
				s.state, s.rawStart = tsSep, end
				continue
			}
			s.rawContent(p, s.buf[s.rawStart:end])
			s.state, s.rawStart = tsPlain, end
		case tsSep:
			j := skipSpace(s.buf, s.rawStart)
			semi := j < len(s.buf) && s.buf[j] == ';'
			if semi {
				j = skipSpace(s.buf, j+1)
			}
			switch {
			case j == len(s.buf):
				if !eof {
					return s.rawStart
				}
				return len(s.buf) // a trailing separator is dropped
			case s.buf[j] == '{' && semi:
				s.startObject(j)
			default:
				s.state = tsPlain // the separator and what follows are content
			}
		case tsPlain:
			p.emit(engine.DeltaText, 0, s.buf[s.rawStart:])
			s.rawStart = 0
			return len(s.buf)
		}
	}
}

func (s *toolStage) startObject(at int) {
	s.state, s.mark, s.scan = tsObject, at, jsonScan{}
	s.as.reset()
}

func (s *toolStage) runMistral(p *Parser, eof bool) int {
	i := 0
	for {
		switch s.state {
		case tsText:
			at, next := s.scanText(p, i, mistralBot, eof)
			if at < 0 {
				return next
			}
			s.rawStart, s.state, s.mark = at, tsAfterBot, at+len(mistralBot)
		case tsAfterBot:
			j := skipSpace(s.buf, s.mark)
			switch {
			case j < len(s.buf) && s.buf[j] == '[':
				// The pre-v11 array (a v11 name is never empty, so "[ARGS]"
				// cannot come first).
				s.state, s.mark, s.scan = tsArray, j, jsonScan{}
				s.arr.reset()
			case j < len(s.buf):
				s.state, s.mark = tsName, j
			case eof:
				s.rawContent(p, s.buf[s.rawStart:])
				s.state = tsText
				return len(s.buf)
			default:
				return s.rawStart
			}
		case tsArray:
			n := jsonDepth(s.buf[s.mark:], &s.scan)
			arr := s.buf[s.mark:]
			if n >= 0 {
				arr = arr[:n]
			}
			s.streamArray(p, arr)
			if n < 0 {
				if !eof {
					return s.rawStart
				}
				if !s.endArray(p, arr) {
					s.rawContent(p, s.buf[s.rawStart:])
				}
				s.state = tsText
				return len(s.buf)
			}
			end := s.mark + n
			s.mistralArray(p, s.buf[s.mark:end], s.buf[s.rawStart:end])
			s.state, i = tsText, end
		case tsName:
			b := s.buf[s.mark:]
			brace := bytes.IndexByte(b, '{')
			if brace < 0 && len(b) <= maxToolNameBytes && !eof {
				return s.rawStart
			}
			if brace < 0 || brace > maxToolNameBytes {
				// No arguments within reach: not a call.
				end := len(s.buf)
				if brace >= 0 {
					end = s.mark + brace
				}
				s.rawContent(p, s.buf[s.rawStart:end])
				s.state, i = tsText, end
				continue
			}
			name := string(bytes.TrimSpace(bytes.Replace(b[:brace], []byte(mistralArgs), nil, 1)))
			if !validName(name) {
				s.rawContent(p, s.buf[s.rawStart:s.mark+brace])
				s.state, i = tsText, s.mark+brace
				continue
			}
			s.name = name
			s.state, s.mark, s.scan = tsArgs, s.mark+brace, jsonScan{}
			s.as.reset()
			if p.opt.Stream {
				s.as.startArgs(name, 0)
			}
		case tsArgs:
			n := jsonDepth(s.buf[s.mark:], &s.scan)
			obj := s.buf[s.mark:]
			if n >= 0 {
				obj = obj[:n]
			}
			s.stream(p, obj, mistralCallIDLen)
			if n < 0 {
				if !eof {
					return s.rawStart
				}
				if !s.endStreamed(p, obj) {
					s.rawContent(p, s.buf[s.rawStart:])
				}
				s.state = tsText
				return len(s.buf)
			}
			end := s.mark + n
			if s.endStreamed(p, obj) {
				// Streamed: it stays a call (see Options.Stream).
			} else if args := s.buf[s.mark:end]; json.Valid(args) {
				p.call(s.name, args, mistralCallIDLen)
				s.made()
			} else {
				s.rawContent(p, s.buf[s.rawStart:end])
			}
			s.name = ""
			s.state, i = tsText, end
		}
	}
}

// mistralArray emits the calls of a pre-v11 array, or raw as content when
// any of them is malformed or there are none.
func (s *toolStage) mistralArray(p *Parser, arr, raw []byte) {
	var calls []jsonCall
	if json.Unmarshal(arr, &calls) != nil || len(calls) == 0 {
		if !s.endArray(p, arr) {
			s.rawContent(p, raw)
		}
		return
	}
	type call struct {
		name string
		args []byte
	}
	ok := make([]call, 0, len(calls))
	for i := range calls {
		name, args, good := calls[i].check()
		if !good && i >= s.arr.n {
			if !s.endArray(p, arr) {
				s.rawContent(p, raw)
			}
			return
		}
		ok = append(ok, call{name, args})
	}
	// The first s.arr.n calls were streamed and recorded as they closed.
	for _, c := range ok[s.arr.n:] {
		p.call(c.name, c.args, mistralCallIDLen)
	}
	s.made()
}

// stream hands out the start and the new arguments bytes of the call
// object obj (its text so far, from its start) when streaming.
func (s *toolStage) stream(p *Parser, obj []byte, idLen int) {
	if !p.opt.Stream || s.as.phase == asBail || s.as.phase == asDone {
		return
	}
	commit, out := s.as.step(obj)
	if commit {
		s.cid = newCallID(idLen)
		p.dst = append(p.dst, Event{Kind: engine.DeltaToolCallStart, ToolIndex: len(p.calls), ToolID: s.cid, ToolName: s.as.name})
	}
	p.emit(engine.DeltaToolCallArgs, len(p.calls), out)
}

// endStreamed ends the call object obj when it was committed: the call is
// recorded with the arguments handed out, whether or not the object turned
// out well formed (its start is out already). It reports false when the
// call was not committed.
func (s *toolStage) endStreamed(p *Parser, obj []byte) bool {
	if !s.as.committed() {
		return false
	}
	args := obj[s.as.args : s.as.args+s.as.sent]
	p.calls = append(p.calls, engine.ToolCall{ID: s.cid, Name: s.as.name, Arguments: string(args)})
	s.as.reset()
	s.cid = ""
	s.made()
	return true
}

// streamArray hands out the events of the calls array arr (its text so
// far) when streaming; a call is recorded as it closes.
func (s *toolStage) streamArray(p *Parser, arr []byte) {
	if !p.opt.Stream {
		return
	}
	for {
		ev, out := s.arr.next(arr)
		switch ev {
		case aeNone:
			return
		case aeStart:
			s.cid = newCallID(mistralCallIDLen)
			p.dst = append(p.dst, Event{Kind: engine.DeltaToolCallStart, ToolIndex: len(p.calls), ToolID: s.cid, ToolName: s.arr.as.name})
		case aeArgs:
			p.emit(engine.DeltaToolCallArgs, len(p.calls), out)
		case aeClose:
			p.calls = append(p.calls, engine.ToolCall{ID: s.cid, Name: s.arr.as.name, Arguments: string(s.arr.closedArgs(arr))})
		}
	}
}

// endArray ends a calls array that did not parse (or never closed): the
// calls that were streamed stay calls (one cut short keeps the arguments
// handed out); the rest of the array is dropped. It reports false when
// nothing was streamed: the array is then content.
func (s *toolStage) endArray(p *Parser, arr []byte) bool {
	if args, ok := s.arr.openArgs(arr); ok {
		p.calls = append(p.calls, engine.ToolCall{ID: s.cid, Name: s.arr.as.name, Arguments: string(args)})
		s.arr.n++
	}
	if s.arr.n == 0 {
		return false
	}
	s.arr.reset()
	s.made()
	return true
}

// jsonCall is a call object of the JSON formats.
type jsonCall struct {
	Name       *string         `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Parameters json.RawMessage `json:"parameters"` // llama3's spelling
}

// check returns the call's name and arguments text, and whether the call
// is well formed: a non-empty name, arguments (or parameters, not both)
// that are an object, null or missing (then "{}").
func (c *jsonCall) check() (name string, args []byte, ok bool) {
	if c.Name == nil || !validName(*c.Name) {
		return "", nil, false
	}
	args = c.Arguments
	if args == nil {
		args = c.Parameters
	} else if c.Parameters != nil {
		return "", nil, false // vLLM asserts "model generated both parameters and arguments"
	}
	args = bytes.TrimSpace(args)
	switch {
	case len(args) == 0 || string(args) == "null":
		args = []byte("{}")
	case args[0] != '{':
		return "", nil, false
	}
	return *c.Name, args, true
}

// parseCall parses one JSON call object (surrounding whitespace allowed).
func parseCall(b []byte) (name string, args []byte, ok bool) {
	var c jsonCall
	if json.Unmarshal(b, &c) != nil {
		return "", nil, false
	}
	return c.check()
}

// validName reports whether name can be a tool's name: not empty, no
// whitespace or control characters.
func validName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] <= ' ' || name[i] == 0x7F {
			return false
		}
	}
	return true
}

// NewCallID returns a tool call id as the parsers name calls: "call_" and
// 24 random alphanumerics. Safe for concurrent use.
func NewCallID() string { return newCallID(callIDLen) }

// newCallID returns a tool call id: "call_" and n random alphanumerics, or
// for n == mistralCallIDLen the bare 9 alphanumerics Mistral's templates
// require. Safe for concurrent use (math/rand/v2's global source).
func newCallID(n int) string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	prefix := "call_"
	if n == mistralCallIDLen {
		prefix = ""
	}
	b := make([]byte, len(prefix), len(prefix)+n)
	copy(b, prefix)
	for range n {
		b = append(b, digits[rand.IntN(len(digits))])
	}
	return string(b)
}
