package openai

import (
	"math"
	"strconv"

	"github.com/vajra-go/vajra/engine"
)

// DefaultCompletionMaxTokens is max_tokens when a completions request omits
// it: 16, as in the OpenAI API (vLLM's default is also 16).
const DefaultCompletionMaxTokens = 16

// CodeMultiplePrompts refuses a batch of prompts in one request.
const CodeMultiplePrompts = "multiple_prompts_unsupported"

// CompletionStreamOptions returns the stream options of a validated request
// for NewCompletionFormatter (Framing and EchoPrompt are left to the caller).
func (r *CompletionRequest) CompletionStreamOptions() CompletionStreamOptions {
	var o CompletionStreamOptions
	if r.StreamOptions != nil {
		o.IncludeUsage = r.StreamOptions.IncludeUsage
		o.ContinuousUsage = r.StreamOptions.IncludeUsage && r.StreamOptions.ContinuousUsageStats
	}
	o.Echo = r.Echo
	o.TokenIDs = r.ReturnTokenIDs
	return o
}

// ToEngine validates r and fills dst (see ChatRequest.ToEngine). The prompt
// goes to dst.Prompt (text) or dst.PromptTokens (token ids). A batch of
// several prompts is refused with CodeMultiplePrompts: engine.Request holds
// one prompt; the server may split r.Prompt into one request per prompt.
func (r *CompletionRequest) ToEngine(dst *engine.Request) *ParamError {
	if err := r.VLLMUnsupported.check(); err != nil {
		return err
	}
	if err := streamInterval(r.StreamInterval, dst); err != nil {
		return err
	}
	if err := checkRequestID(r.RequestID); err != nil {
		return err
	}
	if err := refusedVLLM(r.UseBeamSearch, false, r.PromptEmbeds != nil, r.TruncatePrompt); err != nil {
		return err
	}
	p := &r.Prompt
	switch n := p.Count(); {
	case n == 0:
		return &ParamError{Param: "prompt", Code: CodeMissing, Message: "'prompt' is required and must not be empty."}
	case n > 1:
		return &ParamError{Param: "prompt", Code: CodeMultiplePrompts,
			Message: "'prompt' holds " + strconv.Itoa(n) + " prompts; this server takes one prompt per request."}
	}
	if len(p.Texts) == 1 {
		dst.Prompt = p.Texts[0]
	} else {
		ids := p.Tokens[0]
		if len(ids) == 0 {
			return &ParamError{Param: "prompt", Code: CodeMissing, Message: "'prompt' must not be an empty list of token ids."}
		}
		// engine.Request holds int32 ids: no vocabulary has 2^31 tokens.
		dst.PromptTokens = make([]int32, len(ids))
		for i, id := range ids {
			switch {
			case id < 0:
				return &ParamError{Param: "prompt", Code: CodeInvalidValue,
					Message: "Token ids in 'prompt' must be non-negative (got " + strconv.Itoa(id) + " at index " + strconv.Itoa(i) + ")."}
			case id > math.MaxInt32:
				return &ParamError{Param: "prompt", Code: CodeInvalidValue,
					Message: "Token ids in 'prompt' must be below 2^31 (got " + strconv.Itoa(id) + " at index " + strconv.Itoa(i) + ")."}
			}
			dst.PromptTokens[i] = int32(id)
		}
	}
	if r.Suffix.Defined && r.Suffix.V != "" {
		return &ParamError{Param: "suffix", Code: CodeUnsupported,
			Message: "'suffix' (fill-in-the-middle) is not supported by this server."}
	}
	dst.Model = r.Model
	dst.Stream = r.Stream.V
	dst.ReturnTokenIDs = r.ReturnTokenIDs
	if r.StreamOptions != nil && !r.Stream.V {
		return &ParamError{Param: "stream_options", Code: CodeStreamOptionsNoStream,
			Message: "'stream_options' is only allowed when 'stream' is true."}
	}
	s := &dst.Sampling
	*s = engine.Sampling{N: 1, Temperature: 1, TopP: 1, MaxTokens: DefaultCompletionMaxTokens}
	if r.N.Defined {
		if r.N.V < 1 || r.N.V > MaxChoices {
			return rangeError("n", "an integer from 1 to "+strconv.Itoa(MaxChoices), strconv.Itoa(r.N.V))
		}
		s.N = r.N.V
	}
	if r.BestOf.Defined && r.BestOf.V != s.N {
		return &ParamError{Param: "best_of", Code: CodeUnsupportedValue,
			Message: "'best_of' must equal 'n' (" + strconv.Itoa(s.N) + "): server-side best-of sampling is not supported (got " + strconv.Itoa(r.BestOf.V) + ")."}
	}
	if err := samplingRanges(s, r.Temperature, r.TopP, r.TopK); err != nil {
		return err
	}
	pp := penaltyParams{r.FrequencyPenalty, r.PresencePenalty, r.RepetitionPenalty, r.MinP, &r.LogitBias}
	if err := toEnginePenalties(s, pp); err != nil {
		return err
	}
	s.Unset = unset(r.Temperature, r.TopP, r.TopK, pp, true) // max_tokens: 16 when left out, as in vLLM
	if r.Seed.Defined {
		s.Seed, s.HasSeed = r.Seed.V, true
	}
	if r.MaxTokens.Defined {
		if r.MaxTokens.V < 1 {
			return rangeError("max_tokens", "an integer of at least 1", strconv.Itoa(r.MaxTokens.V))
		}
		s.MaxTokens = r.MaxTokens.V
	}
	s.IgnoreEOS = r.IgnoreEOS
	detokenizeOptions(s, r.SkipSpecialTokens, r.SpacesBetweenSpecialTokens)
	if err := checkMinTokens(r.MinTokens, s); err != nil {
		return err
	}
	if err := validateStop(r.Stop, r.StopTokenIDs, s); err != nil {
		return err
	}
	s.IncludeStopStr = r.IncludeStopStrInOutput
	if r.Logprobs.Defined {
		if r.Logprobs.V < 0 || r.Logprobs.V > engine.MaxTopLogprobs {
			return rangeError("logprobs", "an integer from 0 to 20", strconv.Itoa(r.Logprobs.V))
		}
		s.Logprobs, s.TopLogprobs = true, r.Logprobs.V
	}
	dst.Echo = r.Echo
	dst.SpecialTokens = specialTokens(r.AddSpecialTokens)
	if r.Echo && r.Logprobs.Defined {
		// engine: -1 asks for the prompt tokens' own logprobs only.
		dst.PromptLogprobs = r.Logprobs.V
		if dst.PromptLogprobs == 0 {
			dst.PromptLogprobs = -1
		}
	}
	v := vllmSampling{r.BadWords, r.AllowedTokenIDs, r.Priority, r.StructuredOutputs, r.CacheSalt, r.SessionID, r.VLLMXArgs}
	if err := v.toEngine(dst); err != nil {
		return err
	}
	// vLLM's completions take response_format as chat does; when not
	// text it replaces structured_outputs.
	return r.ResponseFormat.toEngine(dst)
}
