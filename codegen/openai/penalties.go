package openai

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/mailru/easyjson/jlexer"
	"github.com/mailru/easyjson/jwriter"
	"github.com/mailru/easyjson/opt"

	"github.com/vajra-go/vajra/engine"
)

// This file holds the penalty and bias parameters that chat completions and
// completions share: frequency_penalty and presence_penalty (OpenAI),
// repetition_penalty and min_p (vLLM's extensions) and logit_bias (OpenAI),
// their decoding, their validation and their mapping into engine.Sampling.

// MaxLogitBias bounds the entries of "logit_bias" (our bound; vLLM has
// none): every entry costs the engine a look-up per sampled token, and the
// decoder keeps no more than this many, so that a body of a million tiny
// entries does not grow a million-entry slice.
const MaxLogitBias = 1024

// maxBias is the largest |bias| of a logit_bias entry (OpenAI: -100..100).
const maxBias = 100

// LogitBias is "logit_bias": null, or an object mapping token ids (as
// strings holding integers, OpenAI's form) to biases. Decoding keeps the
// entries in body order and remembers the first key that is not a token id;
// validation (toEngineLogitBias) refuses it.
type LogitBias struct {
	// Entries are the valid entries in body order, at most MaxLogitBias.
	Entries []engine.TokenBias
	// Count is the number of entries in the body, Entries' and beyond.
	Count int
	// HasBadKey is set when a key is not a non-negative integer that fits
	// an int: BadKey is the first such key (a copy, cut to 64 bytes).
	HasBadKey bool
	BadKey    string
	// Set is false when logit_bias was absent or null.
	Set bool
}

// UnmarshalEasyJSON implements easyjson.Unmarshaler.
func (b *LogitBias) UnmarshalEasyJSON(in *jlexer.Lexer) {
	*b = LogitBias{}
	switch in.CurrentToken() {
	case jlexer.TokenNull:
		in.Skip()
	case jlexer.TokenDelim:
		if !in.IsDelim('{') {
			unionError(in, "an object mapping token ids to biases")
			return
		}
		b.Set = true
		in.Delim('{')
		for !in.IsDelim('}') {
			// The key is parsed before the next token is read: it may
			// point into the lexer's buffer.
			key := in.UnsafeFieldName(false)
			id, ok := parseTokenID(key)
			if !ok && !b.HasBadKey {
				b.HasBadKey = true
				b.BadKey = strings.Clone(key[:min(len(key), maxKeyEcho)])
			}
			in.WantColon()
			bias := in.Float64()
			in.WantComma()
			b.Count++
			if ok && len(b.Entries) < MaxLogitBias {
				b.Entries = append(b.Entries, engine.TokenBias{TokenID: id, Bias: bias})
			}
		}
		in.Delim('}')
	default:
		unionError(in, "an object mapping token ids to biases")
	}
}

// parseTokenID parses a logit_bias key: a non-negative integer in decimal,
// as vLLM's int() reads it (a sign is allowed, a negative id is not).
func parseTokenID(key string) (int, bool) {
	id, err := strconv.Atoi(key)
	return id, err == nil && id >= 0
}

// MarshalEasyJSON implements easyjson.Marshaler: the entries as an object,
// or null.
func (b LogitBias) MarshalEasyJSON(w *jwriter.Writer) {
	if !b.Set {
		w.RawString("null")
		return
	}
	w.RawByte('{')
	for i, e := range b.Entries {
		if i > 0 {
			w.RawByte(',')
		}
		w.RawByte('"')
		w.Int(e.TokenID)
		w.RawString(`":`)
		w.Float64(e.Bias)
	}
	w.RawByte('}')
}

// penaltyParams are the penalty and bias parameters of a request.
type penaltyParams struct {
	frequency, presence, repetition, minP opt.Float64
	bias                                  *LogitBias
}

// unset marks the sampling fields the request left out (null is left
// out, as in vLLM), which take the model's generation defaults
// (engine.SamplingDefaults); maxTokens says it gave a maximum.
func unset(temperature, topP opt.Float64, topK opt.Int, p penaltyParams, maxTokens bool) engine.SamplingField {
	var g engine.SamplingField
	for _, f := range [...]struct {
		set bool
		f   engine.SamplingField
	}{
		{temperature.Defined, engine.FieldTemperature}, {topP.Defined, engine.FieldTopP}, {topK.Defined, engine.FieldTopK},
		{p.minP.Defined, engine.FieldMinP}, {p.repetition.Defined, engine.FieldRepetitionPenalty},
		{p.presence.Defined, engine.FieldPresencePenalty}, {p.frequency.Defined, engine.FieldFrequencyPenalty},
		{maxTokens, engine.FieldMaxTokens},
	} {
		if f.set {
			g |= f.f
		}
	}
	return engine.AllSamplingFields &^ g
}

// toEnginePenalties validates the penalty and bias parameters and sets them
// in s; it allocates nothing when they are absent.
func toEnginePenalties(s *engine.Sampling, p penaltyParams) *ParamError {
	if err := checkPenalty("frequency_penalty", p.frequency); err != nil {
		return err
	}
	if err := checkPenalty("presence_penalty", p.presence); err != nil {
		return err
	}
	s.FrequencyPenalty, s.PresencePenalty = p.frequency.V, p.presence.V
	if p.repetition.Defined {
		// vLLM: "repetition_penalty must be greater than zero"; no upper
		// bound. JSON has no infinities; NaN cannot come from a body.
		if !(p.repetition.V > 0) {
			return rangeError("repetition_penalty", "a number greater than 0 (1 is off)", fmtFloat(p.repetition.V))
		}
		s.RepetitionPenalty = p.repetition.V
	}
	if p.minP.Defined {
		if !(p.minP.V >= 0 && p.minP.V <= 1) {
			return rangeError("min_p", "a number from 0 to 1", fmtFloat(p.minP.V))
		}
		s.MinP = p.minP.V
	}
	return toEngineLogitBias(s, p.bias)
}

// toEngineLogitBias validates logit_bias and sets s.LogitBias to its
// entries sorted by token id, each id once: when a body names an id twice
// ("7" and "07"), the later entry wins, as in a Python dict (vLLM). The
// entries' slice is b's, sorted in place.
func toEngineLogitBias(s *engine.Sampling, b *LogitBias) *ParamError {
	if !b.Set {
		return nil
	}
	if b.Count > MaxLogitBias {
		return rangeError("logit_bias", "an object of at most "+strconv.Itoa(MaxLogitBias)+" entries",
			strconv.Itoa(b.Count)+" entries")
	}
	if b.HasBadKey {
		return &ParamError{Param: "logit_bias", Code: CodeInvalidValue,
			Message: "The keys of 'logit_bias' must be token ids, non-negative integers (got " + quoteValue(b.BadKey) + ")."}
	}
	for _, e := range b.Entries {
		if !(e.Bias >= -maxBias && e.Bias <= maxBias) {
			return rangeError("logit_bias."+strconv.Itoa(e.TokenID), "a number from -100 to 100", fmtFloat(e.Bias))
		}
	}
	if len(b.Entries) == 0 {
		return nil
	}
	es := b.Entries
	// Stable, so that of two entries for one id the later stays later.
	slices.SortStableFunc(es, func(x, y engine.TokenBias) int { return cmp.Compare(x.TokenID, y.TokenID) })
	k := 0
	for i := range es {
		if i+1 < len(es) && es[i+1].TokenID == es[i].TokenID {
			continue // a later entry for this id follows
		}
		es[k] = es[i]
		k++
	}
	s.LogitBias = es[:k:k]
	return nil
}
