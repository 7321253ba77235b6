package openai

//go:generate go tool easyjson -no_std_marshalers chat.go

import (
	"strings"
	"unsafe"

	"github.com/mailru/easyjson/jlexer"
	"github.com/mailru/easyjson/jwriter"
	"github.com/mailru/easyjson/opt"
)

// This file holds the request schema of POST /v1/chat/completions, as the
// OpenAI API documents it plus vLLM's extensions (top_k, ignore_eos,
// stop_token_ids, repetition_penalty, min_p). Codecs for the structs marked
// easyjson:json are generated into chat_easyjson.go; the union types decode
// by hand below.

// ChatRequest is the body of POST /v1/chat/completions.
//
//easyjson:json
type ChatRequest struct {
	Model    string        `json:"model,intern"`
	Messages []ChatMessage `json:"messages"`

	Temperature      opt.Float64 `json:"temperature"`
	TopP             opt.Float64 `json:"top_p"`
	TopK             opt.Int     `json:"top_k"` // vLLM extension
	N                opt.Int     `json:"n"`
	Seed             opt.Int64   `json:"seed"`
	FrequencyPenalty opt.Float64 `json:"frequency_penalty"`
	PresencePenalty  opt.Float64 `json:"presence_penalty"`
	// RepetitionPenalty and MinP are vLLM extensions.
	RepetitionPenalty opt.Float64 `json:"repetition_penalty"`
	MinP              opt.Float64 `json:"min_p"`
	LogitBias         LogitBias   `json:"logit_bias"`

	MaxTokens           opt.Int `json:"max_tokens"`
	MaxCompletionTokens opt.Int `json:"max_completion_tokens"`
	IgnoreEOS           bool    `json:"ignore_eos"` // vLLM extension
	MinTokens           opt.Int `json:"min_tokens"` // vLLM extension

	Stop         StopList `json:"stop"`
	StopTokenIDs []int    `json:"stop_token_ids"` // vLLM extension
	// IncludeStopStrInOutput keeps a matched stop string (vLLM extension).
	IncludeStopStrInOutput bool `json:"include_stop_str_in_output"`

	// SkipSpecialTokens and SpacesBetweenSpecialTokens are vLLM's
	// detokenizer options (both default true).
	SkipSpecialTokens          opt.Bool `json:"skip_special_tokens"`
	SpacesBetweenSpecialTokens opt.Bool `json:"spaces_between_special_tokens"`

	Logprobs    opt.Bool `json:"logprobs"`
	TopLogprobs opt.Int  `json:"top_logprobs"`

	Stream        opt.Bool       `json:"stream"`
	StreamOptions *StreamOptions `json:"stream_options"`

	Tools             []ChatTool         `json:"tools"`
	ToolChoice        ChatToolChoice     `json:"tool_choice"`
	ParallelToolCalls opt.Bool           `json:"parallel_tool_calls"`
	ResponseFormat    ChatResponseFormat `json:"response_format"`
	ReasoningEffort   string             `json:"reasoning_effort"`
	// IncludeReasoning (vLLM; default true): false leaves the reasoning
	// out of the answer (reasoning_content), streamed and not.
	IncludeReasoning opt.Bool `json:"include_reasoning"`
	// RequestID (vLLM) names the response: its id is the API's prefix
	// and this ("chatcmpl-"+request_id), else a new one.
	RequestID string `json:"request_id"`
	// StreamInterval (vLLM) batches up to this many tokens per streamed
	// chunk; it raises the server's --stream-interval, never lowers it.
	StreamInterval opt.Int `json:"stream_interval"`
	// ChatTemplateKwargs (vLLM extension) are extra variables for the
	// model's chat template, e.g. {"enable_thinking": false}.
	ChatTemplateKwargs RawJSON `json:"chat_template_kwargs"`
	// AddGenerationPrompt (default true) and ContinueFinalMessage are
	// vLLM's chat template switches: assistant prefill is
	// add_generation_prompt false with continue_final_message true.
	AddGenerationPrompt  opt.Bool `json:"add_generation_prompt"`
	ContinueFinalMessage bool     `json:"continue_final_message"`
	// AddSpecialTokens (vLLM; default false) adds the tokenizer's special
	// tokens (BOS) on top of what the chat template writes.
	AddSpecialTokens opt.Bool `json:"add_special_tokens"`

	// vLLM's extensions: words never generated, the only tokens that may
	// be, the queue priority (lower first) and structured outputs.
	BadWords          []string           `json:"bad_words"`
	AllowedTokenIDs   []int              `json:"allowed_token_ids"`
	Priority          opt.Int            `json:"priority"`
	StructuredOutputs *StructuredOutputs `json:"structured_outputs"`
	CacheSalt         opt.String         `json:"cache_salt"`
	// SessionID (vLLM's session_id) names the conversation or agent
	// session the request belongs to, for the engine's KV cache events.
	SessionID opt.String `json:"session_id"`
	// VLLMXArgs (vLLM's vllm_xargs) are extra arguments for the engine's
	// custom extensions (its logits processors' SamplingParams.extra_args):
	// an object of strings, numbers and lists of them.
	VLLMXArgs RawJSON `json:"vllm_xargs"`
	// ReturnTokenIDs puts the prompt's and the answer's token ids in the
	// response.
	ReturnTokenIDs bool `json:"return_token_ids"`

	// vLLM's options whose effect this server does not provide: refused
	// (refusedVLLM, VLLMUnsupported, chatUnsupported) rather than ignored.
	VLLMUnsupported
	Echo             opt.Bool   `json:"echo"`
	Documents        Ignored    `json:"documents"`
	ReturnPromptText opt.Bool   `json:"return_prompt_text"`
	UseBeamSearch    bool       `json:"use_beam_search"`
	ChatTemplate     opt.String `json:"chat_template"`
	TruncatePrompt   opt.Int    `json:"truncate_prompt_tokens"`

	// Accepted and not used: known to the API, no effect on this engine.
	User        string  `json:"user"`
	Metadata    Ignored `json:"metadata"`
	Store       Ignored `json:"store"`
	ServiceTier Ignored `json:"service_tier"`

	// Unknown lists the unknown top-level keys of the body, in order, at
	// most MaxUnknownFields of them; the server counts them per field.
	Unknown []string `json:"-"`
}

// UnmarshalUnknown implements easyjson.UnknownsUnmarshaler: it records key
// and skips its value.
func (r *ChatRequest) UnmarshalUnknown(in *jlexer.Lexer, key string) {
	recordUnknown(&r.Unknown, in, key)
}

// StreamOptions is "stream_options".
//
//easyjson:json
type StreamOptions struct {
	IncludeUsage         bool `json:"include_usage"`
	ContinuousUsageStats bool `json:"continuous_usage_stats"` // vLLM extension
}

// ChatMessage is one entry of "messages".
//
//easyjson:json
type ChatMessage struct {
	Role       string             `json:"role,intern"`
	Content    ChatContent        `json:"content"`
	Name       string             `json:"name"`
	ToolCalls  []ChatToolCallItem `json:"tool_calls"`
	ToolCallID string             `json:"tool_call_id"`
	// ReasoningContent is an assistant turn's prior reasoning (vLLM's
	// reasoning_content; "reasoning" is its newer spelling).
	ReasoningContent string `json:"reasoning_content"`
	Reasoning        string `json:"reasoning"`
}

// ChatToolCallItem is a tool call of an assistant turn in the history.
//
//easyjson:json
type ChatToolCallItem struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function ChatFunctionCall `json:"function"`
}

// ChatFunctionCall is a tool call's function and JSON arguments.
//
//easyjson:json
type ChatFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ChatTool is one entry of "tools".
//
//easyjson:json
type ChatTool struct {
	Type     string          `json:"type"`
	Function ChatFunctionDef `json:"function"`
}

// ChatFunctionDef is a tool's function definition.
//
//easyjson:json
type ChatFunctionDef struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Parameters  RawJSON  `json:"parameters"`
	Strict      opt.Bool `json:"strict"`
}

// ChatResponseFormat is "response_format".
//
//easyjson:json
type ChatResponseFormat struct {
	Type       string          `json:"type"`
	JSONSchema *JSONSchemaSpec `json:"json_schema"`
}

// JSONSchemaSpec is response_format.json_schema.
//
//easyjson:json
type JSONSchemaSpec struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Schema      RawJSON  `json:"schema"`
	Strict      opt.Bool `json:"strict"`
}

// chatContentPart is one part of an array content.
//
//easyjson:json
type chatContentPart struct {
	Type    string `json:"type,intern"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
}

// ChatContent is a message's "content": null, a string, or an array of
// parts. Text parts (and an assistant's refusal parts) are joined with "\n"
// in order, as vLLM does for text-only prompts; the first part of another
// type (image_url, input_audio, file, ...) is remembered so that validation
// refuses it naming its index.
type ChatContent struct {
	// Text is the content's text. A string content is a view of the
	// decoder's input when it has no escapes (UnmarshalEasyJSON):
	// DecodeChatRequest copies it, DecodeChatRequestView leaves it so.
	Text string
	// Set is false when content was absent or null.
	Set bool
	// Parts is the number of parts of an array content (0 for a string).
	Parts int
	// HasBad is true when a part is not text: BadPart is the index of the
	// first such part and BadType its type (cut to 64 bytes).
	HasBad  bool
	BadPart int
	BadType string
}

// UnmarshalEasyJSON implements easyjson.Unmarshaler.
func (c *ChatContent) UnmarshalEasyJSON(in *jlexer.Lexer) {
	*c = ChatContent{}
	switch in.CurrentToken() {
	case jlexer.TokenNull:
		in.Skip()
	case jlexer.TokenString:
		// A view of the input (a copy when it had escapes): the prompt is
		// most of a body, and most requests need it only until their
		// engine has started (DecodeChatRequestView).
		c.Text = in.UnsafeString()
		c.Set = true
	case jlexer.TokenDelim:
		if !in.IsDelim('[') {
			unionError(in, "a string or an array of content parts")
			return
		}
		c.Set = true
		in.Delim('[')
		var b strings.Builder
		texts := 0
		for !in.IsDelim(']') {
			var p chatContentPart
			p.UnmarshalEasyJSON(in)
			switch p.Type {
			case "text", "input_text", "refusal":
				t := p.Text
				if p.Type == "refusal" {
					t = p.Refusal
				}
				// One part: no copy. More: joined with "\n" (vLLM).
				switch texts {
				case 0:
					c.Text = t
				case 1:
					b.WriteString(c.Text)
					fallthrough
				default:
					b.WriteByte('\n')
					b.WriteString(t)
				}
				texts++
			default:
				if !c.HasBad {
					c.HasBad, c.BadPart = true, c.Parts
					t := p.Type
					if len(t) > 64 {
						t = t[:64]
					}
					c.BadType = strings.Clone(t)
				}
			}
			c.Parts++
			in.WantComma()
		}
		in.Delim(']')
		if texts > 1 {
			c.Text = b.String()
		}
	default:
		unionError(in, "a string or an array of content parts")
	}
}

// MarshalEasyJSON implements easyjson.Marshaler (as a string or null).
func (c ChatContent) MarshalEasyJSON(w *jwriter.Writer) {
	if !c.Set {
		w.RawString("null")
		return
	}
	w.String(c.Text)
}

// ChatToolChoice is "tool_choice": "auto", "none", "required", or
// {"type":"function","function":{"name":...}}.
type ChatToolChoice struct {
	// Mode is the string form, or "function" for the object form.
	Mode string
	// Name is the function named by the object form.
	Name string
	Set  bool
}

//easyjson:json
type chatNamedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// UnmarshalEasyJSON implements easyjson.Unmarshaler.
func (t *ChatToolChoice) UnmarshalEasyJSON(in *jlexer.Lexer) {
	*t = ChatToolChoice{}
	switch in.CurrentToken() {
	case jlexer.TokenNull:
		in.Skip()
	case jlexer.TokenString:
		t.Mode = in.String()
		t.Set = true
	case jlexer.TokenDelim:
		if !in.IsDelim('{') {
			unionError(in, `"auto", "none", "required" or a function object`)
			return
		}
		var o chatNamedToolChoice
		o.UnmarshalEasyJSON(in)
		t.Mode, t.Name, t.Set = o.Type, o.Function.Name, true
		if t.Mode == "" {
			t.Mode = "function"
		}
	default:
		unionError(in, `"auto", "none", "required" or a function object`)
	}
}

// MarshalEasyJSON implements easyjson.Marshaler.
func (t ChatToolChoice) MarshalEasyJSON(w *jwriter.Writer) {
	switch {
	case !t.Set:
		w.RawString("null")
	case t.Mode == "function":
		w.RawString(`{"type":"function","function":{"name":`)
		w.String(t.Name)
		w.RawString("}}")
	default:
		w.String(t.Mode)
	}
}

// Ignored is a parameter accepted and skipped (metadata, store, ...).
// Set records that it was present and not null.
type Ignored struct{ Set bool }

// UnmarshalEasyJSON implements easyjson.Unmarshaler.
func (g *Ignored) UnmarshalEasyJSON(in *jlexer.Lexer) {
	g.Set = !in.IsNull()
	in.SkipRecursive()
}

// MarshalEasyJSON implements easyjson.Marshaler (always null).
func (g Ignored) MarshalEasyJSON(w *jwriter.Writer) { w.RawString("null") }

// DecodeChatRequest decodes a chat completions body into r, which it resets
// first (keeping the capacity of r.Messages and r.Unknown). r's strings are
// copies: r does not point into body. The error, when not nil, is a
// *ParamError naming the field at fault.
func DecodeChatRequest(body []byte, r *ChatRequest) error {
	err := DecodeChatRequestView(body, r)
	for i := range r.Messages {
		if c := &r.Messages[i].Content; aliases(c.Text, body) {
			c.Text = strings.Clone(c.Text)
		}
	}
	return err
}

// DecodeChatRequestView is DecodeChatRequest, but the messages' string
// contents may be views of body, which saves a copy of the prompt per
// request: the caller keeps body unchanged for as long as it reads r's
// messages or what it made of them (ToEngine's engine.Messages).
func DecodeChatRequestView(body []byte, r *ChatRequest) error {
	msgs, unk := r.Messages[:0], r.Unknown[:0]
	*r = ChatRequest{Messages: msgs, Unknown: unk}
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

// aliases reports whether s's bytes lie inside b (a view DecodeChatRequest
// must copy; an unescaped string is a copy already).
func aliases(s string, b []byte) bool {
	if len(s) == 0 || len(b) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= lo && p < lo+uintptr(len(b))
}
