// Package anthropic is the Anthropic Messages dialect: the request schema of
// POST /v1/messages and /v1/messages/count_tokens with easyjson-generated
// decoders, its mapping onto engine.Request, the non-streamed response body,
// the stream Formatter (message_start … message_stop), and the error table.
//
// Wire facts follow /work/shared/WIRE.md and the types of
// anthropic-sdk-go v2.15 (Message, MessageStreamEventUnion, Accumulate).
package anthropic

//go:generate go tool easyjson -no_std_marshalers messages.go

import (
	"github.com/mailru/easyjson/jlexer"
	"github.com/mailru/easyjson/jwriter"
	"github.com/mailru/easyjson/opt"

	"github.com/vajra-go/vajra/codegen"
)

// MessagesRequest is the body of POST /v1/messages. Decode it with
// DecodeMessagesRequest and map it with ToEngine. Fields the API defines but
// Vajra ignores (metadata, service_tier, container, mcp_servers…) are
// accepted; fields nobody defines land in Unknown.
//
//easyjson:json
type MessagesRequest struct {
	Model     string    `json:"model,intern"`
	MaxTokens opt.Int   `json:"max_tokens"`
	Messages  []Message `json:"messages"`
	// System is a string or an array of text blocks.
	System     Content     `json:"system"`
	Tools      []Tool      `json:"tools"`
	ToolChoice *ToolChoice `json:"tool_choice"`
	Thinking   *Thinking   `json:"thinking"`
	// OutputConfig is the answer's format (structured outputs) and effort.
	OutputConfig  *OutputConfig `json:"output_config"`
	StopSequences []string      `json:"stop_sequences"`
	Temperature   opt.Float64   `json:"temperature"`
	TopP          opt.Float64   `json:"top_p"`
	TopK          opt.Int       `json:"top_k"`
	Stream        bool          `json:"stream"`
	Metadata      Metadata      `json:"metadata"`
	ServiceTier   string        `json:"service_tier"`

	// Unknown lists the top-level keys no field matched, in order (for a
	// log line or a metric; their values are skipped, never parsed twice).
	Unknown []string `json:"-"`
}

// UnmarshalUnknown implements easyjson.UnknownsUnmarshaler: it records key
// and skips its value. The key is copied: it points into the request body.
func (r *MessagesRequest) UnmarshalUnknown(in *jlexer.Lexer, key string) {
	r.Unknown = append(r.Unknown, string([]byte(key)))
	in.SkipRecursive()
}

// Message is one turn of messages[].
//
//easyjson:json
type Message struct {
	Role    string  `json:"role,intern"`
	Content Content `json:"content"`
}

// ContentBlock is one block of a message's content (or of a tool_result's
// content). Which fields are set depends on Type: text, image, tool_use,
// tool_result, thinking, redacted_thinking, document….
//
//easyjson:json
type ContentBlock struct {
	Type string `json:"type,intern"`
	// text
	Text string `json:"text"`
	// tool_use
	ID    string  `json:"id"`
	Name  string  `json:"name"`
	Input RawJSON `json:"input"`
	// tool_result
	ToolUseID string  `json:"tool_use_id"`
	Content   Content `json:"content"`
	IsError   bool    `json:"is_error"`
	// thinking / redacted_thinking
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
	Data      string `json:"data"`
}

// Tool is one entry of tools[]. Custom tools have an input_schema; Anthropic
// server and built-in tools (bash_20250124, web_search_20250305, …) carry a
// versioned type instead, and their extra fields are skipped.
//
//easyjson:json
type Tool struct {
	Type        string  `json:"type"`
	Name        string  `json:"name"`
	Description string  `json:"description"`
	InputSchema RawJSON `json:"input_schema"`
}

// ToolChoice is tool_choice: {type: auto|any|tool|none, name,
// disable_parallel_tool_use}.
//
//easyjson:json
type ToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// Thinking is the thinking config: {type: enabled|disabled|adaptive,
// budget_tokens}.
//
//easyjson:json
type Thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

// OutputConfig is "output_config": Format constrains the answer to a JSON
// Schema (structured outputs); Effort is "low", "medium", "high", "xhigh"
// or "max".
//
//easyjson:json
type OutputConfig struct {
	Effort string        `json:"effort"`
	Format *OutputFormat `json:"format"`
}

// OutputFormat is "output_config.format": type "json_schema" (the
// default) with its "schema".
//
//easyjson:json
type OutputFormat struct {
	Type   string  `json:"type"`
	Schema RawJSON `json:"schema"`
}

// Metadata is the request's metadata object; Vajra only logs user_id.
//
//easyjson:json
type Metadata struct {
	UserID string `json:"user_id"`
}

// Content is a content field that is either a plain string or an array of
// blocks (messages[].content, system, tool_result content). IsString tells
// which form came; both are empty when the field was absent or null.
type Content struct {
	Text     string
	Blocks   []ContentBlock
	IsString bool
}

// UnmarshalEasyJSON implements easyjson.Unmarshaler for the string-or-blocks
// union.
func (c *Content) UnmarshalEasyJSON(in *jlexer.Lexer) {
	switch in.CurrentToken() {
	case jlexer.TokenNull:
		in.Skip()
		*c = Content{}
	case jlexer.TokenString:
		*c = Content{Text: in.String(), IsString: true}
	case jlexer.TokenDelim:
		*c = Content{}
		in.Delim('[')
		for !in.IsDelim(']') {
			var b ContentBlock
			b.UnmarshalEasyJSON(in)
			c.Blocks = append(c.Blocks, b)
			in.WantComma()
		}
		in.Delim(']')
	default:
		in.AddError(&jlexer.LexerError{Offset: in.GetPos(), Reason: "content must be a string or an array of blocks"})
	}
}

// MarshalEasyJSON implements easyjson.Marshaler: the string form when it
// came as a string, else the blocks.
func (c Content) MarshalEasyJSON(w *jwriter.Writer) {
	if c.IsString {
		w.String(c.Text)
		return
	}
	if c.Blocks == nil {
		w.RawString("null")
		return
	}
	w.RawByte('[')
	for i := range c.Blocks {
		if i > 0 {
			w.RawByte(',')
		}
		c.Blocks[i].MarshalEasyJSON(w)
	}
	w.RawByte(']')
}

// RawJSON is codegen.RawJSON: a JSON value kept as an owned copy of its
// bytes.
type RawJSON = codegen.RawJSON

// DecodeMessagesRequest decodes the body of POST /v1/messages into r, which
// should be zero (or reset). It fails only on malformed JSON or a value of
// the wrong JSON type; ToEngine does the semantic checks. Strings are copied:
// r does not keep body. A body that is not UTF-8 or escapes a lone
// surrogate is refused first with an *Error whose message says where
// (codegen.CheckText); other errors are the lexer's, whose text quotes the
// client's bytes.
func DecodeMessagesRequest(body []byte, r *MessagesRequest) error {
	if e := checkText(body); e != nil {
		return e
	}
	in := jlexer.Lexer{Data: body}
	r.UnmarshalEasyJSON(&in)
	return in.Error()
}

// checkText refuses a body that is not UTF-8 or escapes a lone surrogate
// (codegen.CheckText) with a 400 invalid_request_error; nil when the body's
// text is sound.
func checkText(body []byte) *Error {
	if te := codegen.CheckText(body); te != nil {
		return &Error{Kind: KindInvalidRequest, Message: te.Message()}
	}
	return nil
}
