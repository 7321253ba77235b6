package text

import (
	"github.com/vajra-go/vajra/engine"
)

// Options configures a Parser for one choice of one request.
type Options struct {
	// Stop holds the request's stop strings (vLLM's stop, with
	// include_stop_str_in_output false). Empty strings are ignored. The
	// Parser keeps the slice: the caller must not change it until Reset.
	Stop []string
	// IncludeStop (vLLM's include_stop_str_in_output) keeps the matched
	// stop string at the end of the content instead of dropping it.
	IncludeStop bool
	// MinTokens (vLLM's min_tokens) is how many calls to Feed (one per
	// generated token) pass before a stop string may end the output: a
	// stop string counts only when the text of a later token completes it,
	// as in vLLM's detokenizer.
	MinTokens int
	// Reasoning names the reasoning parser (see ReasoningParsers); empty
	// means none: all text is content.
	Reasoning string
	// ReasoningOff says reasoning is disabled for this request (vLLM:
	// chat_template_kwargs enable_thinking=false, whose template closes the
	// think block in the prompt): the output is all content, unparsed.
	ReasoningOff bool
	// Tools names the tool-call parser (see ToolParsers); empty means none.
	Tools string
	// ToolsOff says this request may not call tools (no tools given, or
	// tool_choice none): the content is not parsed for calls.
	ToolsOff bool
	// Stream streams tool calls' arguments as they are generated (vLLM's
	// streamed tool calls): once a call's name is known and its arguments
	// object has begun, the call's start and then each new piece of the
	// arguments come out as events. Such a call stays a call even if its
	// JSON turns out malformed or is cut short (the client has its start
	// already): its Arguments are then the text handed out, and the rest
	// of its call syntax is dropped. Without Stream a call comes out whole
	// when it closes and a malformed one is content (the non-streamed
	// answer; for well-formed calls both give the same ToolCalls).
	Stream bool
}

// Event is one piece of a choice's output, ready to become an
// engine.Delta. Text is set for DeltaText, DeltaReasoning and
// DeltaToolCallArgs, and is valid only until the next call to Feed, Finish
// or Reset on the Parser that produced it (it points into the Parser's
// buffer). ToolIndex, ToolID and ToolName are set for DeltaToolCallStart;
// ToolIndex also for DeltaToolCallArgs.
type Event struct {
	Kind      engine.DeltaKind
	Text      []byte
	ToolIndex int
	ToolID    string
	ToolName  string

	off, end int // Text's place in the Parser's arena while it is built
}

// Parser turns the raw bytes a model generates for one choice into
// content, reasoning and tool-call events, in vLLM's order: UTF-8 assembly,
// stop strings (on the raw text), the reasoning parser, then the tool-call
// parser.
//
// Loop-only: a Parser belongs to the goroutine that generates the choice and
// is not safe for concurrent use. Once its buffers have grown to the size of
// the output, Feed does not allocate for plain text; a finished tool call
// allocates its name, id and arguments strings.
type Parser struct {
	opt Options

	dec   UTF8Stream
	text  []byte // this call's decoded text
	stop  stopStage
	think thinkStage
	tool  toolStage

	// Output of the current call.
	dst   []Event
	first int    // index in dst of this call's first event
	arena []byte // the Text of this call's events

	content   []byte
	reasoning []byte
	calls     []engine.ToolCall

	fed      int // calls to Feed so far
	stopped  bool
	stopStr  string
	finished bool
}

// NewParser returns a Parser for opt. It fails with an error wrapping
// ErrUnknownParser when opt names a parser that does not exist.
func NewParser(opt Options) (*Parser, error) {
	p := new(Parser)
	if err := p.Reset(opt); err != nil {
		return nil, err
	}
	return p, nil
}

// Reset readies p for a new choice with opt, keeping the capacity of its
// buffers (a pool of Parsers stays allocation-free). Events, Content,
// Reasoning and ToolCalls from before are invalid afterwards. On error p is
// unusable until a successful Reset.
func (p *Parser) Reset(opt Options) error {
	think, err := lookupReasoning(opt.Reasoning)
	if err != nil {
		return err
	}
	tool, err := lookupTool(opt.Tools)
	if err != nil {
		return err
	}
	if opt.ReasoningOff {
		think = reasonNone
	}
	if opt.ToolsOff {
		tool = toolNone
	}
	p.opt = opt
	p.dec.Reset()
	p.text = p.text[:0]
	p.stop.reset(opt.Stop)
	p.think.reset(think)
	p.tool.reset(tool)
	p.dst, p.first, p.arena = nil, 0, p.arena[:0]
	p.content = p.content[:0]
	p.reasoning = p.reasoning[:0]
	clear(p.calls)
	p.calls = p.calls[:0]
	p.fed, p.stopped, p.stopStr, p.finished = 0, false, "", false
	return nil
}

// Feed takes the bytes of the next generated token (or any piece of the
// output: raw bytes, need not be valid UTF-8 nor whole characters) and
// appends to dst the events they complete. It returns the extended slice
// and whether a stop string has been matched; the choice must then end, and
// its final output is whatever Finish adds. Once stopped (or finished), Feed
// ignores its input.
//
// The Text of the appended events is valid until the next Feed, Finish or
// Reset; the Text of events an earlier call appended to dst is invalid
// now.
func (p *Parser) Feed(dst []Event, raw []byte) ([]Event, bool) {
	if p.stopped || p.finished {
		return dst, p.stopped
	}
	p.begin(dst)
	p.fed++
	p.text = p.dec.Append(p.text[:0], raw)
	p.stop.feed(p, p.text)
	return p.end(), p.stopped
}

// Count counts n generated tokens whose text comes with a later Feed (a
// worker that sends the text of several tokens at once), for
// Options.MinTokens.
func (p *Parser) Count(n int) { p.fed += n }

// Finish ends the output: it flushes a held incomplete character (as
// U+FFFD), text held back as a possible stop string, an unclosed think tag
// and an unterminated tool call (a call whose JSON is complete becomes a
// call; one that is not comes out as content), and appends the resulting
// events to dst. Call it exactly once per choice, whatever ended it (stop
// string, stop token, length, abort). Event lifetimes are those of Feed.
func (p *Parser) Finish(dst []Event) []Event {
	if p.finished {
		return dst
	}
	p.begin(dst)
	if !p.stopped {
		p.text = p.dec.Flush(p.text[:0])
		p.stop.feed(p, p.text)
	}
	if !p.stopped {
		p.stop.finish(p)
	}
	p.think.finish(p)
	p.tool.finish(p)
	p.finished = true
	return p.end()
}

// Grow gives the buffers of one Feed room for tokens of up to n bytes
// (with stop strings up to n bytes long), in one allocation, so that a
// longer token later in the output does not grow them mid-stream. Call
// it after NewParser or Reset, before the first Feed.
func (p *Parser) Grow(n int) {
	if n <= 0 || cap(p.text) >= n {
		return
	}
	b := make([]byte, 5*n)
	p.text = b[0:0:n]
	p.arena = b[n : n : 3*n]
	p.stop.held = b[3*n : 3*n : 5*n]
}

// UseContentBuffer makes buf, emptied, the buffer the content
// accumulates in: a caller that pools its output buffers, sized for the
// output, feeds the Parser without allocating. Call it after NewParser
// or Reset, before the first Feed; the Parser appends to buf until the
// next Reset.
func (p *Parser) UseContentBuffer(buf []byte) { p.content = buf[:0] }

// ContentBytes is the content so far in the Parser's own buffer (that of
// UseContentBuffer, grown): valid until the next Feed, Finish or Reset,
// read only.
func (p *Parser) ContentBytes() []byte { return p.content }

// Stopped reports whether a stop string ended the output.
func (p *Parser) Stopped() bool { return p.stopped }

// StopString returns the stop string that ended the output, or "".
func (p *Parser) StopString() string { return p.stopStr }

// Content returns the choice's content text so far (without reasoning,
// think tags, tool calls or a stop string), for the non-streamed Result.
// It allocates; call it once, after Finish.
func (p *Parser) Content() string { return string(p.content) }

// Reasoning returns the choice's reasoning text so far. It allocates; call
// it once, after Finish.
func (p *Parser) Reasoning() string { return string(p.reasoning) }

// ToolCalls returns the tool calls made so far, in order. The slice belongs
// to p and is valid until Reset: copy it to keep it longer.
func (p *Parser) ToolCalls() []engine.ToolCall { return p.calls }

// ToolCalled reports whether the output made a tool call; the engine then
// ends the choice with finish_reason tool_calls.
func (p *Parser) ToolCalled() bool { return len(p.calls) > 0 }

func (p *Parser) begin(dst []Event) {
	p.dst, p.first = dst, len(dst)
	p.arena = p.arena[:0]
}

// end points the new events' Text into the arena, which no longer moves.
func (p *Parser) end() []Event {
	out := p.dst
	for i := p.first; i < len(out); i++ {
		e := &out[i]
		if e.end > e.off {
			e.Text = p.arena[e.off:e.end:e.end]
		}
	}
	p.dst = nil
	return out
}

// emit appends text of kind (DeltaText, DeltaReasoning or DeltaToolCallArgs
// with tool index idx) to this call's events, merging it into the previous
// event when that is of the same kind.
func (p *Parser) emit(kind engine.DeltaKind, idx int, b []byte) {
	if len(b) == 0 {
		return
	}
	switch kind {
	case engine.DeltaText:
		p.content = append(p.content, b...)
	case engine.DeltaReasoning:
		p.reasoning = append(p.reasoning, b...)
	}
	off := len(p.arena)
	p.arena = append(p.arena, b...)
	if n := len(p.dst); n > p.first {
		last := &p.dst[n-1]
		if last.Kind == kind && last.ToolIndex == idx && last.end == off && last.end > last.off {
			last.end = len(p.arena)
			return
		}
	}
	p.dst = append(p.dst, Event{Kind: kind, ToolIndex: idx, off: off, end: len(p.arena)})
}

// contentText passes content on from the reasoning stage to the tool stage.
func (p *Parser) contentText(b []byte) { p.tool.feed(p, b) }

// call records a finished tool call and emits its start and arguments.
func (p *Parser) call(name string, args []byte, idLen int) {
	idx := len(p.calls)
	tc := engine.ToolCall{ID: newCallID(idLen), Name: name, Arguments: string(args)}
	p.calls = append(p.calls, tc)
	p.dst = append(p.dst, Event{Kind: engine.DeltaToolCallStart, ToolIndex: idx, ToolID: tc.ID, ToolName: name})
	p.emit(engine.DeltaToolCallArgs, idx, args)
}

// stopStage finds stop strings in the raw text and holds back the tail
// that could still become one.
type stopStage struct {
	stops  []string
	maxLen int
	held   []byte // emitted-to-be: text that may begin a stop string
}

func (s *stopStage) reset(stops []string) {
	s.stops, s.maxLen = stops, 0
	for _, st := range stops {
		s.maxLen = max(s.maxLen, len(st))
	}
	s.held = s.held[:0]
}

// feed checks text, appended to the held tail, for stop strings. A match
// can only start in the held tail or the new text: everything emitted
// before was checked not to begin one. Of two matches the one that starts
// first wins (vLLM takes the first in list order that is found, which can
// leave a complete earlier stop string in the output when two finish in the
// same step; we never do).
func (s *stopStage) feed(p *Parser, text []byte) {
	if s.maxLen == 0 {
		p.think.feed(p, text)
		return
	}
	buf := text
	if len(s.held) > 0 {
		s.held = append(s.held, text...)
		buf = s.held
	}
	best, which := -1, -1
	for i, st := range s.stops {
		if st == "" || p.fed <= p.opt.MinTokens {
			continue
		}
		if j := indexString(buf, st); j >= 0 && (best < 0 || j < best) {
			best, which = j, i
		}
	}
	if best >= 0 {
		p.stopped, p.stopStr = true, s.stops[which]
		if p.opt.IncludeStop {
			best += len(p.stopStr)
		}
		p.think.feed(p, buf[:best])
		s.held = s.held[:0]
		return
	}
	keep := 0
	for _, st := range s.stops {
		keep = max(keep, partialSuffix(buf, st))
	}
	safe := len(buf) - keep
	// Never cut inside a character (only an ill-formed stop string could
	// ask for that: a valid one begins on a character boundary).
	for safe > 0 && safe < len(buf) && !runeStart(buf[safe]) {
		safe--
	}
	p.think.feed(p, buf[:safe])
	if len(s.held) > 0 {
		s.held = s.held[:copy(s.held, buf[safe:])]
	} else {
		s.held = append(s.held, buf[safe:]...)
	}
}

// finish emits the held tail: the output ended before it became a stop
// string.
func (s *stopStage) finish(p *Parser) {
	p.think.feed(p, s.held)
	s.held = s.held[:0]
}

func runeStart(b byte) bool { return b&0xC0 != 0x80 }
