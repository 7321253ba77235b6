package openai

//go:generate go tool easyjson -no_std_marshalers structured.go

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mailru/easyjson/jlexer"
	"github.com/mailru/easyjson/opt"

	"github.com/vajra-go/vajra/engine"
)

// StructuredOutputs is vLLM's "structured_outputs" (chat and
// completions): one constraint of json, regex, choice, grammar,
// json_object. Its whitespace and backend options are accepted and have
// no effect: the grammar is Vajra's own (engine/text/grammar).
//
//easyjson:json
type StructuredOutputs struct {
	// JSON is a JSON Schema, as an object or as a string holding one.
	JSON          RawJSON    `json:"json"`
	Regex         opt.String `json:"regex"`
	Choice        []string   `json:"choice"`
	Grammar       opt.String `json:"grammar"`
	JSONObject    opt.Bool   `json:"json_object"`
	StructuralTag RawJSON    `json:"structural_tag"`

	DisableAnyWhitespace        bool       `json:"disable_any_whitespace"`
	DisableAdditionalProperties bool       `json:"disable_additional_properties"`
	WhitespacePattern           opt.String `json:"whitespace_pattern"`
}

// vllmSampling are the vLLM extensions chat and completions share:
// bad_words, allowed_token_ids, priority and structured_outputs.
type vllmSampling struct {
	badWords   []string
	allowed    []int
	priority   opt.Int
	structured *StructuredOutputs
	cacheSalt  opt.String
	sessionID  opt.String
	xargs      RawJSON
}

// maxCacheSalt is vLLM's longest cache_salt.
const maxCacheSalt = 128

// toEngine fills dst's bad words, allowed ids, priority and format from
// v; the dialect's response_format, decided after, overrides the format
// (as vLLM's structured_outputs_from_response_format).
func (v *vllmSampling) toEngine(dst *engine.Request) *ParamError {
	// Allocated only when used (engine.Request.VLLM).
	ext := func() *engine.VLLMExtensions {
		if dst.VLLM == nil {
			dst.VLLM = &engine.VLLMExtensions{}
		}
		return dst.VLLM
	}
	if v.badWords != nil {
		ext().BadWords = v.badWords
	}
	if v.allowed != nil {
		ext().AllowedTokenIDs = v.allowed
	}
	if v.priority.Defined && v.priority.V != 0 {
		ext().Priority = v.priority.V
	}
	if s := v.cacheSalt; s.Defined {
		// vLLM's validate_cache_salt, in its words.
		if s.V == "" {
			return &ParamError{Param: "cache_salt", Code: CodeInvalidValue,
				Message: "Parameter 'cache_salt' must be a non-empty string if provided."}
		}
		if utf8.RuneCountInString(s.V) > maxCacheSalt || strings.ContainsAny(s.V, "@/\\\x00") {
			return &ParamError{Param: "cache_salt", Code: CodeInvalidValue,
				Message: "Parameter 'cache_salt' must be at most 128 characters and must not contain '@', '/', '\\\\', or NUL."}
		}
		ext().CacheSalt = s.V
	}
	if s := v.sessionID; s.Defined && s.V != "" {
		ext().SessionID = s.V // vLLM's: an empty one is none
	}
	if x := v.xargs; len(x) > 0 {
		n, err := checkXArgs(x)
		if err != nil {
			return err
		}
		if n > 0 { // an empty object is none, as in vLLM
			ext().ExtraArgs = x
		}
		if ext().SessionID == "" {
			// vLLM's session id falls back to vllm_xargs.session_id (a
			// non-empty string) after the field and the header.
			if s := xargsSessionID(x); s != "" {
				ext().SessionID, ext().SessionFromXArgs = s, true
			}
		}
	}
	so := v.structured
	if so == nil {
		return nil
	}
	n := 0
	for _, set := range [...]bool{so.JSON != nil, so.Regex.Defined, so.Choice != nil, so.Grammar.Defined,
		so.JSONObject.Defined && so.JSONObject.V, so.StructuralTag != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return &ParamError{Param: "structured_outputs", Code: CodeInvalidValue,
			Message: "You can only use one kind of structured outputs constraint ('json', 'regex', 'choice', 'grammar', 'json_object' or 'structural_tag'), but " + strconv.Itoa(n) + " are specified."}
	}
	f := &dst.ResponseFormat
	switch {
	case so.JSON != nil:
		schema := []byte(so.JSON)
		if !so.JSON.IsObject() {
			l := jlexer.Lexer{Data: so.JSON}
			s := l.String()
			if l.Consumed(); l.Error() != nil || !RawJSON(s).IsObject() || !json.Valid([]byte(s)) {
				return &ParamError{Param: "structured_outputs.json", Code: CodeInvalidType,
					Message: "'structured_outputs.json' must be a JSON Schema: an object, or a string holding one."}
			}
			schema = []byte(s)
		}
		*f = engine.ResponseFormat{Type: engine.FormatJSONSchema, Schema: schema}
	case so.Regex.Defined:
		if so.Regex.V == "" {
			return &ParamError{Param: "structured_outputs.regex", Code: CodeInvalidValue,
				Message: "'structured_outputs.regex' must not be empty."}
		}
		*f = engine.ResponseFormat{Type: engine.FormatRegex}
		ext().Pattern = so.Regex.V
	case so.Choice != nil:
		if len(so.Choice) == 0 {
			return &ParamError{Param: "structured_outputs.choice", Code: CodeInvalidValue,
				Message: "'structured_outputs.choice' must list at least one choice."}
		}
		*f = engine.ResponseFormat{Type: engine.FormatChoice}
		ext().Choices = so.Choice
	case so.Grammar.Defined:
		*f = engine.ResponseFormat{Type: engine.FormatGrammar}
		ext().Pattern = so.Grammar.V
	case so.JSONObject.V:
		*f = engine.ResponseFormat{Type: engine.FormatJSONObject}
	case so.StructuralTag != nil:
		return &ParamError{Param: "structured_outputs.structural_tag", Code: CodeUnsupported,
			Message: "'structured_outputs.structural_tag' is not supported by this server; use json, regex, choice or grammar."}
	}
	return nil
}

// refusedVLLM refuses vLLM's request options whose effect this server
// does not provide, each a 400 naming it: beam search, a chat template sent with the request (in
// vLLM's words: it refuses one unless started with
// --trust-request-chat-template; Vajra serves the model's own), prompt
// embeddings and prompt truncation (truncate_prompt_tokens: the answer
// would silently be to another prompt).
func refusedVLLM(beam, template, embeds bool, truncate opt.Int) *ParamError {
	switch {
	case truncate.Defined:
		return unsupported("truncate_prompt_tokens", "it does not cut prompts; send the part to answer")
	case beam:
		return unsupported("use_beam_search", "it samples (use n and best-of on the client)")
	case template:
		return &ParamError{Param: "chat_template", Code: CodeInvalidValue,
			Message: "Chat template is passed with request, but --trust-request-chat-template is not set. Refused request with untrusted chat template."}
	case embeds:
		return unsupported("prompt_embeds", "send the prompt as text or token ids")
	}
	return nil
}

// VLLMUnsupported are vLLM's request options whose effect this server
// does not provide, each refused with a 400 naming it when a request sets
// it (not null; a boolean only when true) rather than ignored: the answer
// would silently not be what was asked for. Embedded in the chat and
// completions requests.
type VLLMUnsupported struct {
	ThinkingTokenBudget    Ignored  `json:"thinking_token_budget"`
	PromptLogprobs         Ignored  `json:"prompt_logprobs"`
	LogprobTokenIDs        Ignored  `json:"logprob_token_ids"`
	RepetitionDetection    Ignored  `json:"repetition_detection"`
	KVTransferParams       Ignored  `json:"kv_transfer_params"`
	ECTransferParams       Ignored  `json:"ec_transfer_params"`
	Watermarking           opt.Bool `json:"watermarking"`
	ReturnTokensAsTokenIDs opt.Bool `json:"return_tokens_as_token_ids"`
	ReturnTokenOffsets     opt.Bool `json:"return_token_offsets"`
}

// check refuses the first option set, naming it.
func (u *VLLMUnsupported) check() *ParamError {
	for _, c := range [...]struct {
		set         bool
		param, hint string
	}{
		{u.ThinkingTokenBudget.Set, "thinking_token_budget", "reasoning is not cut short; bound the whole answer with max_tokens"},
		{u.PromptLogprobs.Set, "prompt_logprobs", "on /v1/completions ask for echo with logprobs, whose first tokens are the prompt's"},
		{u.LogprobTokenIDs.Set, "logprob_token_ids", "ask for top_logprobs"},
		{u.RepetitionDetection.Set, "repetition_detection", "use repetition_penalty or stop strings"},
		{u.KVTransferParams.Set, "kv_transfer_params", "it does not hand KV caches between engines"},
		{u.ECTransferParams.Set, "ec_transfer_params", "it does not hand encoder caches between engines"},
		{u.Watermarking.V, "watermarking", "its answers carry no watermark"},
		{u.ReturnTokensAsTokenIDs.V, "return_tokens_as_token_ids", "ask for return_token_ids, which gives the ids beside the tokens"},
		{u.ReturnTokenOffsets.V, "return_token_offsets", "logprobs of /v1/completions carry text_offset"},
	} {
		if c.set {
			return unsupported(c.param, c.hint)
		}
	}
	return nil
}

// unsupported is the 400 of a request option this server does not
// provide: it names the option and says what to do instead (hint).
func unsupported(param, hint string) *ParamError {
	return &ParamError{Param: param, Code: CodeUnsupported, Message: "'" + param + "' is not supported by this server: " + hint + "."}
}

// kwargsTemplate reports whether chat_template_kwargs carries a
// "chat_template" that is not null, which vLLM refuses as it refuses
// chat_template.
func kwargsTemplate(kw RawJSON) bool {
	if len(kw) == 0 || !bytes.Contains(kw, []byte(`"chat_template"`)) {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(kw, &m) != nil {
		return false
	}
	v, ok := m["chat_template"]
	return ok && string(v) != "null"
}

// streamInterval is vLLM's per-request stream_interval, at least 1.
func streamInterval(v opt.Int, dst *engine.Request) *ParamError {
	if !v.Defined {
		return nil
	}
	if v.V < 1 {
		return &ParamError{Param: "stream_interval", Code: CodeInvalidValue,
			Message: "'stream_interval' must be at least 1 (got " + strconv.Itoa(v.V) + ")."}
	}
	dst.StreamInterval = v.V
	return nil
}

// maxRequestIDLen bounds vLLM's request_id (our bound): it is written into
// the head of every chunk of a stream.
const maxRequestIDLen = 256

// checkRequestID refuses a request_id too long to name a response.
func checkRequestID(id string) *ParamError {
	if len(id) > maxRequestIDLen {
		return &ParamError{Param: "request_id", Code: CodeInvalidValue,
			Message: "'request_id' is at most " + strconv.Itoa(maxRequestIDLen) + " bytes (got " + strconv.Itoa(len(id)) + ")."}
	}
	return nil
}

// checkXArgs checks vllm_xargs as vLLM types it: an object whose values
// are strings, numbers, or lists of strings and numbers. n is its number
// of keys.
func checkXArgs(x RawJSON) (n int, _ *ParamError) {
	bad := &ParamError{Param: "vllm_xargs", Code: CodeInvalidValue,
		Message: "'vllm_xargs' must be an object whose values are strings, numbers, or lists of strings and numbers."}
	var m map[string]json.RawMessage
	if json.Unmarshal(x, &m) != nil || m == nil {
		return 0, bad
	}
	scalar := func(v json.RawMessage) bool {
		if len(v) == 0 {
			return false
		}
		switch c := v[0]; {
		case c == '"':
			return true
		case c == '-' || c >= '0' && c <= '9':
			return true
		}
		return false
	}
	for _, v := range m {
		if scalar(v) {
			continue
		}
		var list []json.RawMessage
		if len(v) == 0 || v[0] != '[' || json.Unmarshal(v, &list) != nil {
			return 0, bad
		}
		for _, e := range list {
			if !scalar(e) {
				return 0, bad
			}
		}
	}
	return len(m), nil
}

// xargsSessionID is vllm_xargs's "session_id" when it is a non-empty
// string, else "".
func xargsSessionID(x RawJSON) string {
	var m struct {
		SessionID json.RawMessage `json:"session_id"`
	}
	var s string
	if json.Unmarshal(x, &m) != nil || json.Unmarshal(m.SessionID, &s) != nil {
		return ""
	}
	return s
}
