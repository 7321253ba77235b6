package v032

import (
	"bytes"
	"encoding/json"

	"github.com/tinylib/msgp/msgp"
)

// Request is one EngineCoreRequest (vllm/v1/engine/__init__.py), the
// payload of TypeAdd. Only what a token-in front end fills is here;
// multimodal features, pooling, LoRA and prompt embeddings are written as
// absent.
type Request struct {
	ID     string
	Prompt []int32
	// Sampling is required (a generation request).
	Sampling *Sampling
	// ArrivalTime is the wall-clock time in seconds the front end received
	// the request (the engine's latency metrics start there).
	ArrivalTime float64
	// CacheSalt isolates the request's prefix cache ("" = none).
	CacheSalt string
	// DataParallelRank pins the request to one engine rank (-1 = any).
	DataParallelRank int
	ClientIndex      int
	CurrentWave      int
	// Priority orders the waiting queue under the priority scheduling
	// policy (lower first).
	Priority int
	// ExternalID is the user-facing request id ("" = none: the engine
	// reports ID).
	ExternalID string
	// SessionID names the request's session in the engine's KV cache
	// events ("" = none).
	SessionID string
}

// Structured-output kinds, one per StructuredOutputsParams field.
const (
	StructNone = iota
	StructJSON
	StructRegex
	StructChoice
	StructGrammar
	StructJSONObject
	StructStructuralTag
)

// Sampling is SamplingParams as the engine reads it: a map by field name
// with the defaults left out (omit_defaults), in the field order of
// vllm/sampling_params.py. The zero value is not vLLM's defaults: use
// NewSampling.
type Sampling struct {
	N                 int
	PresencePenalty   float64
	FrequencyPenalty  float64
	RepetitionPenalty float64
	Temperature       float64
	TopP              float64
	TopK              int
	MinP              float64
	Seed              int64
	HasSeed           bool
	StopTokenIDs      []int32
	IgnoreEOS         bool
	MaxTokens         int
	MinTokens         int
	// Logprobs is the number of alternatives per generated token, -1 for
	// none (0: the sampled token's own only).
	Logprobs int
	// PromptLogprobs likewise for the prompt, -1 for none.
	PromptLogprobs int
	// EOSTokenID is the private _eos_token_id the front end fills from the
	// tokenizer (-1 = none).
	EOSTokenID int32
	// AllStopTokenIDs is the private _all_stop_token_ids: StopTokenIDs and
	// every EOS id of the model, sorted, each once (the engine masks them
	// until min_tokens).
	AllStopTokenIDs []int32
	// Struct is the structured-output constraint: StructKind and its value
	// (a JSON schema's text, a regex, a grammar, a structural tag), and
	// StructBackend the private _backend ("xgrammar", "guidance", ...).
	StructKind    int
	StructValue   string
	StructChoices []string
	StructBackend string
	// LogitBias as parallel slices, sorted by token id.
	LogitBiasIDs    []int32
	LogitBiasValues []float64
	AllowedTokenIDs []int32
	// BadWordsTokenIDs is the private _bad_words_token_ids: each bad word
	// as the tokenizer encodes it.
	BadWordsTokenIDs [][]int32
	// SkipReadingPrefixCache keeps the request from reading the prefix
	// cache.
	SkipReadingPrefixCache bool
	// ExtraArgs is extra_args, for the engine's custom logits processors:
	// a JSON object of strings, numbers and lists of them (vllm_xargs,
	// checked by the dialect), written as a msgpack map; nil: none.
	ExtraArgs []byte
}

// NewSampling returns SamplingParams at vLLM's defaults.
func NewSampling() Sampling {
	return Sampling{N: 1, RepetitionPenalty: 1, Temperature: 1, TopP: 1, MaxTokens: 16, Logprobs: -1, PromptLogprobs: -1, EOSTokenID: -1}
}

// AppendRequest writes r as EngineCoreRequest: a positional array of the
// 22 fields of 0.32, ending at the last field that is not at its default
// (at least the nine without a default).
func AppendRequest(b []byte, r *Request) []byte {
	n := 9
	switch {
	case r.SessionID != "":
		n = 21
	case r.ExternalID != "":
		n = 17
	case r.Priority != 0:
		n = 14
	case r.CurrentWave != 0:
		n = 13
	case r.ClientIndex != 0:
		n = 12
	}
	b = msgp.AppendArrayHeader(b, uint32(n))
	b = msgp.AppendString(b, r.ID)
	b = msgp.AppendArrayHeader(b, uint32(len(r.Prompt)))
	for _, t := range r.Prompt {
		b = appendInt(b, int64(t))
	}
	b = msgp.AppendNil(b) // mm_features
	b = AppendSampling(b, r.Sampling)
	b = msgp.AppendNil(b) // pooling_params
	b = msgp.AppendFloat64(b, r.ArrivalTime)
	b = msgp.AppendNil(b) // lora_request
	b = appendOptString(b, r.CacheSalt)
	if r.DataParallelRank >= 0 {
		b = appendInt(b, int64(r.DataParallelRank))
	} else {
		b = msgp.AppendNil(b)
	}
	if n == 9 {
		return b
	}
	b = msgp.AppendNil(b) // prompt_embeds
	b = msgp.AppendNil(b) // prompt_is_token_ids
	b = appendInt(b, int64(r.ClientIndex))
	if n == 12 {
		return b
	}
	b = appendInt(b, int64(r.CurrentWave))
	if n == 13 {
		return b
	}
	b = appendInt(b, int64(r.Priority))
	if n == 14 {
		return b
	}
	b = msgp.AppendNil(b)         // trace_headers
	b = msgp.AppendBool(b, false) // resumable
	b = appendOptString(b, r.ExternalID)
	if n == 17 {
		return b
	}
	b = msgp.AppendNil(b)         // reasoning_ended
	b = msgp.AppendNil(b)         // reasoning_parser_kwargs
	b = msgp.AppendBool(b, false) // abort_immediately
	return msgp.AppendString(b, r.SessionID)
}

// appendOptString writes an optional string field: nil for "" (None).
func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return msgp.AppendNil(b)
	}
	return msgp.AppendString(b, s)
}

// AppendSampling writes s as SamplingParams: the fields that differ from
// vLLM's defaults, in declaration order.
func AppendSampling(b []byte, s *Sampling) []byte {
	fields := [...]bool{
		s.N != 1,
		s.PresencePenalty != 0,
		s.FrequencyPenalty != 0,
		s.RepetitionPenalty != 1,
		s.Temperature != 1,
		s.TopP != 1,
		s.TopK != 0,
		s.MinP != 0,
		s.HasSeed,
		len(s.StopTokenIDs) > 0,
		s.IgnoreEOS,
		s.MaxTokens != 16,
		s.MinTokens != 0,
		s.Logprobs >= 0,
		s.PromptLogprobs >= 0,
		s.EOSTokenID >= 0,
		len(s.AllStopTokenIDs) > 0,
		s.StructKind != StructNone,
		len(s.LogitBiasIDs) > 0,
		s.AllowedTokenIDs != nil,
		s.BadWordsTokenIDs != nil,
		s.SkipReadingPrefixCache,
		len(s.ExtraArgs) > 0,
	}
	n := 0
	for _, on := range fields {
		if on {
			n++
		}
	}
	b = msgp.AppendMapHeader(b, uint32(n))
	f := 0
	next := func() bool { f++; return fields[f-1] }
	if next() {
		b = appendInt(msgp.AppendString(b, "n"), int64(s.N))
	}
	if next() {
		b = msgp.AppendFloat64(msgp.AppendString(b, "presence_penalty"), s.PresencePenalty)
	}
	if next() {
		b = msgp.AppendFloat64(msgp.AppendString(b, "frequency_penalty"), s.FrequencyPenalty)
	}
	if next() {
		b = msgp.AppendFloat64(msgp.AppendString(b, "repetition_penalty"), s.RepetitionPenalty)
	}
	if next() {
		b = msgp.AppendFloat64(msgp.AppendString(b, "temperature"), s.Temperature)
	}
	if next() {
		b = msgp.AppendFloat64(msgp.AppendString(b, "top_p"), s.TopP)
	}
	if next() {
		b = appendInt(msgp.AppendString(b, "top_k"), int64(s.TopK))
	}
	if next() {
		b = msgp.AppendFloat64(msgp.AppendString(b, "min_p"), s.MinP)
	}
	if next() {
		b = appendInt(msgp.AppendString(b, "seed"), s.Seed)
	}
	if next() {
		b = appendInts(msgp.AppendString(b, "stop_token_ids"), s.StopTokenIDs)
	}
	if next() {
		b = msgp.AppendBool(msgp.AppendString(b, "ignore_eos"), true)
	}
	if next() {
		b = appendInt(msgp.AppendString(b, "max_tokens"), int64(s.MaxTokens))
	}
	if next() {
		b = appendInt(msgp.AppendString(b, "min_tokens"), int64(s.MinTokens))
	}
	if next() {
		b = appendInt(msgp.AppendString(b, "logprobs"), int64(s.Logprobs))
	}
	if next() {
		b = appendInt(msgp.AppendString(b, "prompt_logprobs"), int64(s.PromptLogprobs))
	}
	if next() {
		b = appendInt(msgp.AppendString(b, "_eos_token_id"), int64(s.EOSTokenID))
	}
	if next() {
		b = appendInts(msgp.AppendString(b, "_all_stop_token_ids"), s.AllStopTokenIDs)
	}
	if next() {
		b = appendStructured(msgp.AppendString(b, "structured_outputs"), s)
	}
	if next() {
		b = msgp.AppendString(b, "logit_bias")
		b = msgp.AppendMapHeader(b, uint32(len(s.LogitBiasIDs)))
		for i, id := range s.LogitBiasIDs {
			b = appendInt(b, int64(id))
			b = msgp.AppendFloat64(b, s.LogitBiasValues[i])
		}
	}
	if next() {
		b = appendInts(msgp.AppendString(b, "allowed_token_ids"), s.AllowedTokenIDs)
	}
	if next() {
		b = msgp.AppendString(b, "_bad_words_token_ids")
		b = msgp.AppendArrayHeader(b, uint32(len(s.BadWordsTokenIDs)))
		for _, w := range s.BadWordsTokenIDs {
			b = appendInts(b, w)
		}
	}
	if next() {
		b = msgp.AppendBool(msgp.AppendString(b, "skip_reading_prefix_cache"), true)
	}
	if next() {
		b = appendJSON(msgp.AppendString(b, "extra_args"), s.ExtraArgs)
	}
	return b
}

// appendJSON writes the JSON value js as msgpack, in its own order:
// objects as maps, arrays as arrays, numbers as integers when they are
// whole and fit 64 bits (else floats), strings, booleans and null. js
// must be valid JSON (the dialect checked it); what does not parse ends
// the value as null.
func appendJSON(b []byte, js []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	b, _ = appendJSONValue(b, d)
	return b
}

func appendJSONValue(b []byte, d *json.Decoder) ([]byte, error) {
	t, err := d.Token()
	if err != nil {
		return msgp.AppendNil(b), err
	}
	switch v := t.(type) {
	case json.Delim:
		var items []json.RawMessage
		var keys []string
		for d.More() {
			if v == '{' {
				k, err := d.Token()
				if err != nil {
					return msgp.AppendNil(b), err
				}
				ks, _ := k.(string)
				keys = append(keys, ks)
			}
			var raw json.RawMessage
			if err := d.Decode(&raw); err != nil {
				return msgp.AppendNil(b), err
			}
			items = append(items, raw)
		}
		if _, err := d.Token(); err != nil { // the closing delimiter
			return msgp.AppendNil(b), err
		}
		if v == '{' {
			b = msgp.AppendMapHeader(b, uint32(len(items)))
		} else {
			b = msgp.AppendArrayHeader(b, uint32(len(items)))
		}
		for i, raw := range items {
			if v == '{' {
				b = msgp.AppendString(b, keys[i])
			}
			b = appendJSON(b, raw)
		}
		return b, nil
	case string:
		return msgp.AppendString(b, v), nil
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return appendInt(b, i), nil
		}
		f, err := v.Float64()
		return msgp.AppendFloat64(b, f), err
	case bool:
		return msgp.AppendBool(b, v), nil
	}
	return msgp.AppendNil(b), nil
}

func appendInts(b []byte, ids []int32) []byte {
	b = msgp.AppendArrayHeader(b, uint32(len(ids)))
	for _, t := range ids {
		b = appendInt(b, int64(t))
	}
	return b
}

// appendStructured writes StructuredOutputsParams, a dataclass: msgspec
// writes every public field, then the private _backend and
// _backend_was_auto.
func appendStructured(b []byte, s *Sampling) []byte {
	b = msgp.AppendMapHeader(b, 11)
	str := func(b []byte, name string, kind int) []byte {
		b = msgp.AppendString(b, name)
		if s.StructKind == kind {
			return msgp.AppendString(b, s.StructValue)
		}
		return msgp.AppendNil(b)
	}
	b = str(b, "json", StructJSON)
	b = str(b, "regex", StructRegex)
	b = msgp.AppendString(b, "choice")
	if s.StructKind == StructChoice {
		b = msgp.AppendArrayHeader(b, uint32(len(s.StructChoices)))
		for _, c := range s.StructChoices {
			b = msgp.AppendString(b, c)
		}
	} else {
		b = msgp.AppendNil(b)
	}
	b = str(b, "grammar", StructGrammar)
	b = msgp.AppendString(b, "json_object")
	if s.StructKind == StructJSONObject {
		b = msgp.AppendBool(b, true)
	} else {
		b = msgp.AppendNil(b)
	}
	b = msgp.AppendBool(msgp.AppendString(b, "disable_any_whitespace"), false)
	b = msgp.AppendBool(msgp.AppendString(b, "disable_additional_properties"), false)
	b = msgp.AppendNil(msgp.AppendString(b, "whitespace_pattern"))
	b = str(b, "structural_tag", StructStructuralTag)
	b = msgp.AppendString(b, "_backend")
	if s.StructBackend != "" {
		b = msgp.AppendString(b, s.StructBackend)
	} else {
		b = msgp.AppendNil(b)
	}
	b = msgp.AppendBool(msgp.AppendString(b, "_backend_was_auto"), false)
	return b
}
