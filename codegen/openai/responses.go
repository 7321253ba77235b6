package openai

//go:generate go tool easyjson -no_std_marshalers responses.go

import (
	"github.com/mailru/easyjson/jlexer"
	"github.com/mailru/easyjson/jwriter"
	"github.com/mailru/easyjson/opt"

	"github.com/vajra-go/vajra/engine"
)

// This file holds the schemas of the Responses API (POST /v1/responses): the
// request, and the response object Vajra returns, streams and stores. Codecs
// for the structs marked easyjson:json are generated into
// responses_easyjson.go; the unions decode by hand below.

// ResponsesRequest is the body of POST /v1/responses.
//
//easyjson:json
type ResponsesRequest struct {
	Model string `json:"model,intern"`
	// Input is a string or an array of input items.
	Input              ResponsesInput `json:"input"`
	Instructions       string         `json:"instructions"`
	PreviousResponseID string         `json:"previous_response_id"`
	// Store defaults to true: use StoreEnabled.
	Store             opt.Bool            `json:"store"`
	Tools             []ResponsesTool     `json:"tools"`
	ToolChoice        ResponsesToolChoice `json:"tool_choice"`
	ParallelToolCalls opt.Bool            `json:"parallel_tool_calls"`
	Reasoning         *ResponsesReasoning `json:"reasoning"`
	MaxOutputTokens   opt.Int             `json:"max_output_tokens"`
	// MaxToolCalls bounds the calls to built-in tools (which this server
	// refuses): checked and echoed, as vLLM echoes it.
	MaxToolCalls opt.Int     `json:"max_tool_calls"`
	Temperature  opt.Float64 `json:"temperature"`
	TopP         opt.Float64 `json:"top_p"`
	// TopLogprobs (0..20) asks for output token logprobs with that many
	// alternatives, as does include "message.output_text.logprobs".
	TopLogprobs opt.Int           `json:"top_logprobs"`
	Text        *ResponsesText    `json:"text"`
	Stream      bool              `json:"stream"`
	Metadata    ResponsesMetadata `json:"metadata"`
	User        string            `json:"user"`
	Truncation  string            `json:"truncation"`
	Include     []string          `json:"include"`
	Background  bool              `json:"background"`
	// Prompt (a reusable prompt's id and variables, kept by OpenAI),
	// Conversation (OpenAI's Conversations API) and vLLM's
	// include_reasoning false are refused: this server keeps no prompts
	// or conversations (previous_response_id chains responses), and
	// writes the reasoning items it generates.
	Prompt           Ignored  `json:"prompt"`
	Conversation     Ignored  `json:"conversation"`
	IncludeReasoning opt.Bool `json:"include_reasoning"`

	// vLLM's extensions (its ResponsesRequest), as in chat: sampling,
	// stop conditions, detokenization, the queue priority, structured
	// outputs (exclusive with text.format) and chat template variables.
	TopK                   opt.Int            `json:"top_k"`
	MinP                   opt.Float64        `json:"min_p"`
	RepetitionPenalty      opt.Float64        `json:"repetition_penalty"`
	PresencePenalty        opt.Float64        `json:"presence_penalty"`
	FrequencyPenalty       opt.Float64        `json:"frequency_penalty"`
	LogitBias              LogitBias          `json:"logit_bias"`
	Seed                   opt.Int64          `json:"seed"`
	Stop                   StopList           `json:"stop"`
	StopTokenIDs           []int              `json:"stop_token_ids"`
	IgnoreEOS              bool               `json:"ignore_eos"`
	IncludeStopStrInOutput bool               `json:"include_stop_str_in_output"`
	SkipSpecialTokens      opt.Bool           `json:"skip_special_tokens"`
	Priority               opt.Int            `json:"priority"`
	StructuredOutputs      *StructuredOutputs `json:"structured_outputs"`
	CacheSalt              opt.String         `json:"cache_salt"`
	SessionID              opt.String         `json:"session_id"` // vLLM's, as chat's
	VLLMXArgs              RawJSON            `json:"vllm_xargs"` // vLLM's, as chat's
	ChatTemplateKwargs     RawJSON            `json:"chat_template_kwargs"`

	// Accepted and not used.
	ServiceTier    Ignored `json:"service_tier"`
	PromptCacheKey Ignored `json:"prompt_cache_key"`
	SafetyID       Ignored `json:"safety_identifier"`
	StreamOptions  Ignored `json:"stream_options"`

	// Unknown lists the unknown top-level keys, in order, at most
	// MaxUnknownFields of them.
	Unknown []string `json:"-"`
}

// UnmarshalUnknown implements easyjson.UnknownsUnmarshaler: it records key
// and skips its value.
func (r *ResponsesRequest) UnmarshalUnknown(in *jlexer.Lexer, key string) {
	recordUnknown(&r.Unknown, in, key)
}

// StoreEnabled reports whether the response is to be stored ("store"
// defaults to true).
func (r *ResponsesRequest) StoreEnabled() bool { return r.Store.Get(true) }

// ResponsesInputItem is one item of "input" (and, with an ID, of a stored
// response's input or output). Type may be omitted for a message.
//
//easyjson:json
type ResponsesInputItem struct {
	Type   string `json:"type,intern"`
	ID     string `json:"id"`
	Status string `json:"status"`
	// message
	Role    string           `json:"role,intern"`
	Content ResponsesContent `json:"content"`
	// function_call, function_call_output
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// Output is a string (or text parts, flattened).
	Output ResponsesContent `json:"output"`
}

// ResponsesContentPart is one part of a message's content.
//
//easyjson:json
type ResponsesContentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// Refusal is the text of an assistant "refusal" part.
	Refusal string `json:"refusal"`
	// Logprobs are an output_text part's token logprobs (response objects
	// only; rendered by hand, never decoded).
	Logprobs []engine.TokenLogprob `json:"-"`
}

// ResponsesTool is one entry of "tools". Only function tools are served;
// the others (web_search, file_search, …) are refused by ToEngine.
//
//easyjson:json
type ResponsesTool struct {
	Type        string   `json:"type"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Parameters  RawJSON  `json:"parameters"`
	Strict      opt.Bool `json:"strict"`
}

// ResponsesReasoning is "reasoning": {effort, summary}.
//
//easyjson:json
type ResponsesReasoning struct {
	Effort  string `json:"effort"`
	Summary string `json:"summary"`
}

// ResponsesText is "text": {format, verbosity}.
//
//easyjson:json
type ResponsesText struct {
	Format    ResponsesTextFormat `json:"format"`
	Verbosity string              `json:"verbosity"`
}

// ResponsesTextFormat is "text.format": {type: text|json_object|json_schema,
// name, schema, strict, description}.
//
//easyjson:json
type ResponsesTextFormat struct {
	Type        string   `json:"type"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Schema      RawJSON  `json:"schema"`
	Strict      opt.Bool `json:"strict"`
}

// ResponsesInput is "input": a string (one user message) or an array of items.
type ResponsesInput struct {
	Text     string
	Items    []ResponsesInputItem
	IsString bool
}

// UnmarshalEasyJSON implements easyjson.Unmarshaler.
func (v *ResponsesInput) UnmarshalEasyJSON(in *jlexer.Lexer) {
	items := v.Items[:0]
	*v = ResponsesInput{}
	switch in.CurrentToken() {
	case jlexer.TokenNull:
		in.Skip()
	case jlexer.TokenString:
		v.Text, v.IsString = in.String(), true
	case jlexer.TokenDelim:
		in.Delim('[')
		for !in.IsDelim(']') {
			var it ResponsesInputItem
			it.UnmarshalEasyJSON(in)
			items = append(items, it)
			in.WantComma()
		}
		in.Delim(']')
		v.Items = items
	default:
		unionError(in, "a string or an array of input items")
	}
}

// MarshalEasyJSON implements easyjson.Marshaler.
func (v ResponsesInput) MarshalEasyJSON(w *jwriter.Writer) {
	if v.IsString {
		w.String(v.Text)
		return
	}
	w.RawByte('[')
	for i := range v.Items {
		if i > 0 {
			w.RawByte(',')
		}
		v.Items[i].MarshalEasyJSON(w)
	}
	w.RawByte(']')
}

// ResponsesContent is a message's "content" (or a function_call_output's
// "output"): a string or an array of parts.
type ResponsesContent struct {
	Text     string
	Parts    []ResponsesContentPart
	IsString bool
	Set      bool // present and not null
}

// UnmarshalEasyJSON implements easyjson.Unmarshaler.
func (c *ResponsesContent) UnmarshalEasyJSON(in *jlexer.Lexer) {
	*c = ResponsesContent{}
	switch in.CurrentToken() {
	case jlexer.TokenNull:
		in.Skip()
	case jlexer.TokenString:
		c.Text, c.IsString, c.Set = in.String(), true, true
	case jlexer.TokenDelim:
		c.Set = true
		in.Delim('[')
		for !in.IsDelim(']') {
			var p ResponsesContentPart
			p.UnmarshalEasyJSON(in)
			c.Parts = append(c.Parts, p)
			in.WantComma()
		}
		in.Delim(']')
	default:
		unionError(in, "a string or an array of content parts")
	}
}

// MarshalEasyJSON implements easyjson.Marshaler.
func (c ResponsesContent) MarshalEasyJSON(w *jwriter.Writer) {
	switch {
	case c.IsString:
		w.String(c.Text)
	case !c.Set:
		w.RawString("null")
	default:
		w.RawByte('[')
		for i := range c.Parts {
			if i > 0 {
				w.RawByte(',')
			}
			c.Parts[i].MarshalEasyJSON(w)
		}
		w.RawByte(']')
	}
}

// ResponsesToolChoice is "tool_choice": "auto" | "none" | "required" |
// {"type":"function","name":…} (other object types are kept in Mode for
// ToEngine to refuse).
type ResponsesToolChoice struct {
	Set  bool
	Mode string // auto, none, required, function, or another object type
	Name string
}

// responsesNamedToolChoice is the object form of tool_choice.
//
//easyjson:json
type responsesNamedToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// UnmarshalEasyJSON implements easyjson.Unmarshaler.
func (t *ResponsesToolChoice) UnmarshalEasyJSON(in *jlexer.Lexer) {
	*t = ResponsesToolChoice{}
	switch in.CurrentToken() {
	case jlexer.TokenNull:
		in.Skip()
	case jlexer.TokenString:
		t.Set, t.Mode = true, in.String()
	case jlexer.TokenDelim:
		var o responsesNamedToolChoice
		o.UnmarshalEasyJSON(in)
		t.Set, t.Mode, t.Name = true, o.Type, o.Name
	default:
		unionError(in, `"auto", "none", "required" or a tool choice object`)
	}
}

// MarshalEasyJSON implements easyjson.Marshaler: the echo in a response
// object ("auto" when unset).
func (t ResponsesToolChoice) MarshalEasyJSON(w *jwriter.Writer) {
	switch t.Mode {
	case "":
		w.String("auto")
	case "auto", "none", "required":
		w.String(t.Mode)
	default:
		w.RawString(`{"type":`)
		w.String(t.Mode)
		w.RawString(`,"name":`)
		w.String(t.Name)
		w.RawByte('}')
	}
}

// ResponsesMetadata is "metadata": up to 16 string pairs, kept in the order
// sent so the echo is stable (a Go map would reorder it).
type ResponsesMetadata struct {
	Pairs []ResponsesMetadataPair
	// Bad is set when a value was not a string (ToEngine refuses it).
	Bad bool
}

// ResponsesMetadataPair is one metadata key and value.
type ResponsesMetadataPair struct{ Key, Value string }

// UnmarshalEasyJSON implements easyjson.Unmarshaler.
func (m *ResponsesMetadata) UnmarshalEasyJSON(in *jlexer.Lexer) {
	*m = ResponsesMetadata{}
	if in.IsNull() {
		in.Skip()
		return
	}
	in.Delim('{')
	for !in.IsDelim('}') {
		key := in.String()
		in.WantColon()
		if in.CurrentToken() == jlexer.TokenString {
			m.Pairs = append(m.Pairs, ResponsesMetadataPair{Key: key, Value: in.String()})
		} else {
			m.Bad = true
			in.SkipRecursive()
		}
		in.WantComma()
	}
	in.Delim('}')
}

// MarshalEasyJSON implements easyjson.Marshaler ({} when empty).
func (m ResponsesMetadata) MarshalEasyJSON(w *jwriter.Writer) {
	w.RawByte('{')
	for i, p := range m.Pairs {
		if i > 0 {
			w.RawByte(',')
		}
		w.String(p.Key)
		w.RawByte(':')
		w.String(p.Value)
	}
	w.RawByte('}')
}

// DecodeResponsesRequest decodes a Responses API body into r, which it
// resets first. r's strings are copies: r does not point into body. The
// error, when not nil, is a *ParamError naming the field at fault.
func DecodeResponsesRequest(body []byte, r *ResponsesRequest) error {
	*r = ResponsesRequest{Unknown: r.Unknown[:0]}
	if pe := checkText(body); pe != nil {
		return pe
	}
	in := jlexer.Lexer{Data: body}
	r.UnmarshalEasyJSON(&in)
	if err := in.Error(); err != nil {
		return decodeError(body, err)
	}
	return nil
}

// ResponseObject is a Responses API response object, as returned by
// POST /v1/responses, carried by response.created / .completed / .failed
// stream events, and returned by GET /v1/responses/{id}. Build it with
// BuildResponse; render it with AppendResponse. The field order is OpenAI's.
//
//easyjson:json
type ResponseObject struct {
	ID                 string                     `json:"id"`
	Object             string                     `json:"object"`
	CreatedAt          int64                      `json:"created_at"`
	Status             string                     `json:"status"`
	Background         bool                       `json:"background"`
	CompletedAt        opt.Int64                  `json:"completed_at"`
	Error              *ResponseErrorObject       `json:"error"`
	IncompleteDetails  *ResponseIncompleteDetails `json:"incomplete_details"`
	Instructions       opt.String                 `json:"instructions"`
	MaxOutputTokens    opt.Int                    `json:"max_output_tokens"`
	MaxToolCalls       opt.Int                    `json:"max_tool_calls"`
	Model              string                     `json:"model"`
	Output             []ResponseItem             `json:"output"`
	ParallelToolCalls  bool                       `json:"parallel_tool_calls"`
	PreviousResponseID opt.String                 `json:"previous_response_id"`
	Reasoning          ResponseReasoningEcho      `json:"reasoning"`
	ServiceTier        string                     `json:"service_tier"`
	Store              bool                       `json:"store"`
	Temperature        float64                    `json:"temperature"`
	Text               ResponseTextEcho           `json:"text"`
	ToolChoice         ResponsesToolChoice        `json:"tool_choice"`
	Tools              []ResponsesTool            `json:"tools"`
	TopLogprobs        int                        `json:"top_logprobs"`
	TopP               float64                    `json:"top_p"`
	Truncation         string                     `json:"truncation"`
	Usage              *ResponseUsage             `json:"usage"`
	User               opt.String                 `json:"user"`
	Metadata           ResponsesMetadata          `json:"metadata"`
}

// ResponseItem is one item of a response's output (message, reasoning,
// function_call) or of its stored input (message, function_call,
// function_call_output). It marshals by hand (responses_object.go) so each
// type gets exactly its own members.
type ResponseItem struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Status string `json:"status"`
	Role   string `json:"role"`
	// Content holds a message's parts (input_text, output_text, refusal) or
	// a reasoning item's reasoning_text.
	Content   []ResponsesContentPart `json:"content"`
	CallID    string                 `json:"call_id"`
	Name      string                 `json:"name"`
	Arguments string                 `json:"arguments"`
	Output    string                 `json:"output"`
}

// ResponseErrorObject is a failed response's "error".
//
//easyjson:json
type ResponseErrorObject struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ResponseIncompleteDetails is an incomplete response's "incomplete_details".
//
//easyjson:json
type ResponseIncompleteDetails struct {
	Reason string `json:"reason"`
}

// ResponseReasoningEcho is the response's "reasoning" (null members when
// the request had none).
//
//easyjson:json
type ResponseReasoningEcho struct {
	Effort  opt.String `json:"effort"`
	Summary opt.String `json:"summary"`
}

// ResponseTextEcho is the response's "text" config.
//
//easyjson:json
type ResponseTextEcho struct {
	Format    ResponseFormatEcho `json:"format"`
	Verbosity string             `json:"verbosity"`
}

// ResponseFormatEcho is "text.format" in a response: {"type":"text"}, or the
// json_schema's name, schema and strict.
//
//easyjson:json
type ResponseFormatEcho struct {
	Type        string   `json:"type"`
	Name        string   `json:"name,omitempty"`
	Description string   `json:"description,omitempty"`
	Schema      RawJSON  `json:"schema,omitempty"`
	Strict      opt.Bool `json:"strict,omitempty"`
}

// ResponseUsage is a response's token usage.
//
//easyjson:json
type ResponseUsage struct {
	InputTokens         int                   `json:"input_tokens"`
	InputTokensDetails  ResponseInputDetails  `json:"input_tokens_details"`
	OutputTokens        int                   `json:"output_tokens"`
	OutputTokensDetails ResponseOutputDetails `json:"output_tokens_details"`
	TotalTokens         int                   `json:"total_tokens"`
}

// ResponseInputDetails breaks input tokens down.
//
//easyjson:json
type ResponseInputDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// ResponseOutputDetails breaks output tokens down.
//
//easyjson:json
type ResponseOutputDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// responseStreamEvent is what ResponseAccumulator reads of one Responses
// stream event: its type, the output item it is about, and its delta, item
// or part.
//
//easyjson:json
type responseStreamEvent struct {
	Type        string                `json:"type"`
	OutputIndex int                   `json:"output_index"`
	Delta       string                `json:"delta"`
	Item        *ResponseItem         `json:"item"`
	Part        *ResponsesContentPart `json:"part"`
}
