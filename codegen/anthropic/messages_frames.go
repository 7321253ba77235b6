package anthropic

import (
	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// StreamConfig is what a StreamFormatter needs to know about its request.
type StreamConfig struct {
	// ID is the message id ("msg_…"), Model the model echoed back.
	ID, Model string
	// Framing wraps each event (one HTTP/1.1 chunk per event by default).
	Framing codegen.Framing
	// Ping sends a ping event right after message_start, as Anthropic does.
	Ping bool
}

// blockKind is the type of the content block a StreamFormatter has open.
type blockKind uint8

const (
	blockNone blockKind = iota
	blockThinking
	blockText
	blockToolUse
)

// StreamFormatter writes the SSE events of one streamed Messages response:
// message_start, then per content block content_block_start →
// content_block_delta* → content_block_stop (indices 0, 1, 2… in order),
// message_delta with the stop reason and usage, message_stop. Each event is
//
//	event: <type>\ndata: {"type":"<type>",…}\n\n
//
// in its own transport frame. The block bookkeeping lives here: reasoning
// opens a thinking block, text a text block (closing the thinking block with
// a signature_delta first), each tool call a tool_use block.
//
// A StreamFormatter implements engine.Formatter; n is always 1 in this
// dialect. It is used from one goroutine at a time; Reset readies it for
// another request so it can be pooled. No method allocates.
type StreamFormatter struct {
	cfg       StreamConfig
	prompt    int // prompt tokens, from AppendStart
	cached    int // of those, served from the prefix cache
	output    int // generated tokens seen so far (when no Usage is given)
	next      int // index of the next content block
	open      blockKind
	toolCalls int // tool_use blocks opened so far
	ended     bool
}

var _ engine.Formatter = (*StreamFormatter)(nil)

// NewStreamFormatter returns a formatter for one streamed response.
func NewStreamFormatter(cfg StreamConfig) *StreamFormatter {
	return &StreamFormatter{cfg: cfg}
}

// Reset readies f for another response.
func (f *StreamFormatter) Reset(cfg StreamConfig) { *f = StreamFormatter{cfg: cfg} }

// begin opens the frame of event typ (codegen.BeginEvent).
func (f *StreamFormatter) begin(dst []byte, typ string) ([]byte, int) {
	return codegen.BeginEvent(dst, f.cfg.Framing, typ)
}

// end closes the data object and the event, and ends its frame.
func (f *StreamFormatter) end(dst []byte, mark int) []byte {
	return codegen.EndEvent(dst, f.cfg.Framing, mark)
}

// AppendStart appends message_start (an empty assistant message with the
// prompt's usage) and, when configured, a ping.
func (f *StreamFormatter) AppendStart(dst []byte, s *engine.Start) []byte {
	f.prompt, f.cached = s.PromptTokens, s.CachedTokens
	dst, mark := f.begin(dst, "message_start")
	dst = append(dst, `,"message":{"id":`...)
	dst = codegen.AppendJSONStringS(dst, f.cfg.ID)
	dst = append(dst, `,"type":"message","role":"assistant","model":`...)
	dst = codegen.AppendJSONStringS(dst, f.cfg.Model)
	dst = append(dst, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	dst = appendUsageCounts(dst, f.prompt, f.cached, 0)
	dst = append(dst, '}')
	dst = f.end(dst, mark)
	if f.cfg.Ping {
		dst, mark = f.begin(dst, "ping")
		dst = f.end(dst, mark)
	}
	return dst
}

// AppendDelta appends the events of one step's output.
func (f *StreamFormatter) AppendDelta(dst []byte, d *engine.Delta) []byte {
	f.output += len(d.TokenIDs)
	switch d.Kind {
	case engine.DeltaReasoning:
		if f.open != blockThinking {
			dst = f.closeBlock(dst)
			dst = f.openBlock(dst, blockThinking, d)
		}
		if len(d.Text) > 0 {
			dst = f.blockDelta(dst, `{"type":"thinking_delta","thinking":`, d.Text)
		}
	case engine.DeltaText:
		if f.open != blockText {
			if len(d.Text) == 0 {
				return dst // open the block with the first visible text
			}
			dst = f.closeBlock(dst)
			dst = f.openBlock(dst, blockText, d)
		}
		if len(d.Text) > 0 {
			dst = f.blockDelta(dst, `{"type":"text_delta","text":`, d.Text)
		}
	case engine.DeltaToolCallStart:
		dst = f.closeBlock(dst)
		dst = f.openBlock(dst, blockToolUse, d)
	case engine.DeltaToolCallArgs:
		if f.open != blockToolUse {
			// Arguments with no open call break the engine's contract; open
			// an anonymous call rather than drop them.
			dst = f.closeBlock(dst)
			dst = f.openBlock(dst, blockToolUse, d)
		}
		if len(d.Text) > 0 {
			dst = f.blockDelta(dst, `{"type":"input_json_delta","partial_json":`, d.Text)
		}
	}
	return dst
}

// openBlock appends content_block_start for a block of kind k at the next index.
func (f *StreamFormatter) openBlock(dst []byte, k blockKind, d *engine.Delta) []byte {
	dst, mark := f.begin(dst, "content_block_start")
	dst = append(dst, `,"index":`...)
	dst = codegen.AppendInt(dst, int64(f.next))
	switch k {
	case blockThinking:
		dst = append(dst, `,"content_block":{"type":"thinking","thinking":"","signature":""}`...)
	case blockText:
		dst = append(dst, `,"content_block":{"type":"text","text":""}`...)
	case blockToolUse:
		dst = append(dst, `,"content_block":{"type":"tool_use","id":`...)
		dst = appendToolUseID(dst, d.ToolCallID, f.cfg.ID, f.toolCalls)
		dst = append(dst, `,"name":`...)
		dst = codegen.AppendJSONStringS(dst, d.ToolName)
		dst = append(dst, `,"input":{}}`...)
		f.toolCalls++
	}
	f.open = k
	return f.end(dst, mark)
}

// blockDelta appends a content_block_delta for the open block; head is the
// delta object up to its text member's colon.
func (f *StreamFormatter) blockDelta(dst []byte, head string, text []byte) []byte {
	dst, mark := f.begin(dst, "content_block_delta")
	dst = append(dst, `,"index":`...)
	dst = codegen.AppendInt(dst, int64(f.next))
	dst = append(dst, `,"delta":`...)
	dst = append(dst, head...)
	dst = codegen.AppendJSONString(dst, text)
	dst = append(dst, '}')
	return f.end(dst, mark)
}

// closeBlock appends content_block_stop for the open block, if any; a
// thinking block first gets its signature_delta.
func (f *StreamFormatter) closeBlock(dst []byte) []byte {
	if f.open == blockNone {
		return dst
	}
	if f.open == blockThinking {
		dst = f.blockDelta(dst, `{"type":"signature_delta","signature":`, signature)
	}
	dst, mark := f.begin(dst, "content_block_stop")
	dst = append(dst, `,"index":`...)
	dst = codegen.AppendInt(dst, int64(f.next))
	dst = f.end(dst, mark)
	f.open = blockNone
	f.next++
	return dst
}

var signature = []byte(ThinkingSignature)

// AppendChoiceEnd closes the open block and appends message_delta with the
// stop reason, the stop sequence and the usage so far.
func (f *StreamFormatter) AppendChoiceEnd(dst []byte, e *engine.ChoiceEnd) []byte {
	if f.ended {
		return dst
	}
	f.ended = true
	dst = f.closeBlock(dst)
	prompt, cached, output := f.prompt, f.cached, f.output
	if u := e.Usage; u != nil {
		prompt, cached, output = u.PromptTokens, u.CachedTokens, u.CompletionTokens
	}
	dst, mark := f.begin(dst, "message_delta")
	dst = append(dst, `,"delta":{"stop_reason":"`...)
	dst = append(dst, stopReason(e.FinishReason, e.StopString)...)
	dst = append(dst, `","stop_sequence":`...)
	dst = appendStopSequence(dst, e.FinishReason, e.StopString)
	dst = append(dst, `},"usage":`...)
	dst = appendUsageCounts(dst, prompt, cached, output)
	return f.end(dst, mark)
}

// AppendEnd appends message_stop and ends the chunked body. A stream whose
// choice was never closed gets its message_delta from res first.
func (f *StreamFormatter) AppendEnd(dst []byte, res *engine.Result) []byte {
	if !f.ended {
		e := engine.ChoiceEnd{FinishReason: engine.FinishStop, StopTokenID: -1, Usage: &res.Usage}
		if len(res.Choices) > 0 {
			c := &res.Choices[0]
			e.FinishReason, e.StopString = c.FinishReason, c.StopString
		}
		dst = f.AppendChoiceEnd(dst, &e)
	}
	dst, mark := f.begin(dst, "message_stop")
	dst = f.end(dst, mark)
	return codegen.AppendLastChunk(dst, f.cfg.Framing)
}

// AppendError appends the stream's error event and ends the chunked body
// (AppendStreamError).
func (f *StreamFormatter) AppendError(dst []byte, err *engine.Error) []byte {
	return AppendStreamError(dst, f.cfg.Framing, err)
}

// AppendStreamError appends an `event: error` with the Anthropic error
// object ({"type":"error","error":{"type","message"}}, as the SDKs parse
// it) and ends the chunked body. It needs nothing of the stream before it:
// StreamFormatter.AppendError writes it, and so does a session that must
// end a stream itself, whoever wrote the events before.
func AppendStreamError(dst []byte, framing codegen.Framing, err *engine.Error) []byte {
	k := engineKind(err.Kind)
	dst, mark := codegen.BeginFrame(dst, framing)
	dst = append(dst, "event: error\ndata: "...)
	msg := err.Message
	if msg == "" {
		msg = k.Type()
	}
	dst = AppendErrorBody(dst, k.Type(), msg)
	dst = append(dst, "\n\n"...)
	dst = codegen.EndFrame(dst, framing, mark)
	return codegen.AppendLastChunk(dst, framing)
}
