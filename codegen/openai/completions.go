package openai

//go:generate go tool easyjson -no_std_marshalers completions.go

import (
	"github.com/mailru/easyjson/jlexer"
	"github.com/mailru/easyjson/jwriter"
	"github.com/mailru/easyjson/opt"
)

// This file holds the request schema of POST /v1/completions (the legacy
// text completions API), with vLLM's extensions. Codecs for the structs
// marked easyjson:json are generated into completions_easyjson.go.

// CompletionRequest is the body of POST /v1/completions.
//
//easyjson:json
type CompletionRequest struct {
	Model  string     `json:"model,intern"`
	Prompt Prompt     `json:"prompt"`
	Suffix opt.String `json:"suffix"` // refused when not empty

	Temperature      opt.Float64 `json:"temperature"`
	TopP             opt.Float64 `json:"top_p"`
	TopK             opt.Int     `json:"top_k"` // vLLM extension
	N                opt.Int     `json:"n"`
	BestOf           opt.Int     `json:"best_of"`
	Seed             opt.Int64   `json:"seed"`
	FrequencyPenalty opt.Float64 `json:"frequency_penalty"`
	PresencePenalty  opt.Float64 `json:"presence_penalty"`
	// RepetitionPenalty and MinP are vLLM extensions.
	RepetitionPenalty opt.Float64 `json:"repetition_penalty"`
	MinP              opt.Float64 `json:"min_p"`
	LogitBias         LogitBias   `json:"logit_bias"`

	MaxTokens opt.Int `json:"max_tokens"`
	IgnoreEOS bool    `json:"ignore_eos"` // vLLM extension
	MinTokens opt.Int `json:"min_tokens"` // vLLM extension

	Stop         StopList `json:"stop"`
	StopTokenIDs []int    `json:"stop_token_ids"` // vLLM extension
	// IncludeStopStrInOutput keeps a matched stop string (vLLM extension).
	IncludeStopStrInOutput bool `json:"include_stop_str_in_output"`

	// SkipSpecialTokens and SpacesBetweenSpecialTokens are vLLM's
	// detokenizer options (both default true).
	SkipSpecialTokens          opt.Bool `json:"skip_special_tokens"`
	SpacesBetweenSpecialTokens opt.Bool `json:"spaces_between_special_tokens"`

	Echo     bool    `json:"echo"`
	Logprobs opt.Int `json:"logprobs"` // 0..20 alternatives; null: no logprobs

	Stream        opt.Bool       `json:"stream"`
	StreamOptions *StreamOptions `json:"stream_options"`

	// vLLM's extensions: words never generated, the only tokens that may
	// be, the queue priority (lower first) and structured outputs.
	BadWords          []string           `json:"bad_words"`
	AllowedTokenIDs   []int              `json:"allowed_token_ids"`
	Priority          opt.Int            `json:"priority"`
	StructuredOutputs *StructuredOutputs `json:"structured_outputs"`
	CacheSalt         opt.String         `json:"cache_salt"`
	// SessionID is vLLM's session_id, as chat's; VLLMXArgs its
	// vllm_xargs, as chat's.
	SessionID opt.String `json:"session_id"`
	VLLMXArgs RawJSON    `json:"vllm_xargs"`
	// ResponseFormat (vLLM: as chat's) constrains the completion to JSON.
	ResponseFormat ChatResponseFormat `json:"response_format"`
	// ReturnTokenIDs puts the prompt's and the answer's token ids in the
	// response; AddSpecialTokens (default true) gives the prompt text the
	// tokenizer's special tokens (BOS).
	ReturnTokenIDs   bool     `json:"return_token_ids"`
	AddSpecialTokens opt.Bool `json:"add_special_tokens"`
	// RequestID (vLLM) names the response: its id is the API's prefix
	// and this ("chatcmpl-"+request_id), else a new one.
	RequestID string `json:"request_id"`
	// StreamInterval (vLLM) batches up to this many tokens per streamed
	// chunk; it raises the server's --stream-interval, never lowers it.
	StreamInterval opt.Int `json:"stream_interval"`

	// vLLM's options whose effect this server does not provide: refused
	// (refusedVLLM, VLLMUnsupported) rather than ignored.
	VLLMUnsupported
	UseBeamSearch  bool    `json:"use_beam_search"`
	PromptEmbeds   RawJSON `json:"prompt_embeds"`
	TruncatePrompt opt.Int `json:"truncate_prompt_tokens"`

	// Accepted and not used.
	User string `json:"user"`

	// Unknown lists the unknown top-level keys (see ChatRequest.Unknown).
	Unknown []string `json:"-"`
}

// UnmarshalUnknown implements easyjson.UnknownsUnmarshaler.
func (r *CompletionRequest) UnmarshalUnknown(in *jlexer.Lexer, key string) {
	recordUnknown(&r.Unknown, in, key)
}

// Prompt is "prompt": a string, an array of strings, an array of token ids,
// or an array of arrays of token ids. Texts holds the string forms, Tokens
// the token forms; exactly one is set after a successful decode (both nil
// when prompt was absent or null).
type Prompt struct {
	Texts  []string
	Tokens [][]int
	// Array is true when the prompt was sent as an array (even of one).
	Array bool
}

// Count returns the number of prompts.
func (p *Prompt) Count() int { return len(p.Texts) + len(p.Tokens) }

// UnmarshalEasyJSON implements easyjson.Unmarshaler.
func (p *Prompt) UnmarshalEasyJSON(in *jlexer.Lexer) {
	*p = Prompt{}
	const wants = "a string, an array of strings, an array of token ids or an array of arrays of token ids"
	switch in.CurrentToken() {
	case jlexer.TokenNull:
		in.Skip()
	case jlexer.TokenString:
		p.Texts = []string{in.String()}
	case jlexer.TokenDelim:
		if !in.IsDelim('[') {
			unionError(in, wants)
			return
		}
		p.Array = true
		in.Delim('[')
		// The first element decides the form; the others must match it.
		switch in.CurrentToken() {
		case jlexer.TokenString:
			for !in.IsDelim(']') {
				p.Texts = append(p.Texts, in.String())
				in.WantComma()
			}
		case jlexer.TokenNumber:
			var ids []int
			for !in.IsDelim(']') {
				ids = append(ids, in.Int())
				in.WantComma()
			}
			p.Tokens = [][]int{ids}
		case jlexer.TokenDelim:
			for !in.IsDelim(']') {
				if !in.IsDelim('[') {
					unionError(in, "an array of token ids")
					return
				}
				ids := []int{}
				in.Delim('[')
				for !in.IsDelim(']') {
					ids = append(ids, in.Int())
					in.WantComma()
				}
				in.Delim(']')
				p.Tokens = append(p.Tokens, ids)
				in.WantComma()
			}
		default:
			if !in.IsDelim(']') {
				unionError(in, wants)
				return
			}
		}
		in.Delim(']')
	default:
		unionError(in, wants)
	}
}

// MarshalEasyJSON implements easyjson.Marshaler.
func (p Prompt) MarshalEasyJSON(w *jwriter.Writer) {
	switch {
	case len(p.Texts) == 1 && !p.Array:
		w.String(p.Texts[0])
	case p.Texts != nil:
		StopList(p.Texts).MarshalEasyJSON(w)
	case p.Tokens != nil:
		w.RawByte('[')
		for i, ids := range p.Tokens {
			if i > 0 {
				w.RawByte(',')
			}
			w.RawByte('[')
			for j, id := range ids {
				if j > 0 {
					w.RawByte(',')
				}
				w.Int(id)
			}
			w.RawByte(']')
		}
		w.RawByte(']')
	default:
		w.RawString("null")
	}
}

// DecodeCompletionRequest decodes a completions body into r, which it resets
// first. The error, when not nil, is a *ParamError naming the field at fault.
func DecodeCompletionRequest(body []byte, r *CompletionRequest) error {
	unk := r.Unknown[:0]
	*r = CompletionRequest{Unknown: unk}
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
