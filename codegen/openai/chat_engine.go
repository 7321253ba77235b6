package openai

import (
	"bytes"
	"strconv"

	"github.com/mailru/easyjson/opt"

	"github.com/vajra-go/vajra/engine"
)

// Limits on chat requests. Each is the OpenAI API's own limit unless noted.
const (
	// MaxChoices bounds "n" (OpenAI allows 128).
	MaxChoices = 128
	// MaxStop bounds the stop strings. OpenAI allows 4; vLLM has no limit;
	// we allow more than OpenAI but keep it bounded, since every stop string
	// costs the engine a hold-back check per token.
	MaxStop = 16
	// MaxStopTokenIDs bounds "stop_token_ids" (vLLM extension; our bound).
	MaxStopTokenIDs = 64
	// MaxTools bounds "tools" (OpenAI allows 128).
	MaxTools = 128
	// maxToolNameLen is OpenAI's limit on a function name: ^[a-zA-Z0-9_-]{1,64}$.
	maxToolNameLen = 64
)

// ChatStreamOptions returns the stream options of a validated request, for
// NewChatFormatter (Framing is left to the caller).
func (r *ChatRequest) ChatStreamOptions() ChatStreamOptions {
	var o ChatStreamOptions
	if r.StreamOptions != nil {
		o.IncludeUsage = r.StreamOptions.IncludeUsage
		o.ContinuousUsage = r.StreamOptions.IncludeUsage && r.StreamOptions.ContinuousUsageStats
	}
	o.TokenIDs = r.ReturnTokenIDs
	o.NoReasoning = r.IncludeReasoning.Defined && !r.IncludeReasoning.V
	return o
}

// ToEngine validates r and fills dst (which the caller has reset; ID, Model
// routing, Formatter and Arrival are the caller's; StreamInterval is the
// request's stream_interval, 0 when none, which the caller raises to the
// server's). It returns the first problem found, naming the parameter, or
// nil.
func (r *ChatRequest) ToEngine(dst *engine.Request) *ParamError {
	if len(r.Messages) == 0 {
		return &ParamError{Param: "messages", Code: CodeMissing, Message: "'messages' must be a non-empty array."}
	}
	dst.Model = r.Model
	dst.Stream = r.Stream.V
	dst.ReturnTokenIDs = r.ReturnTokenIDs
	dst.HideReasoning = r.IncludeReasoning.Defined && !r.IncludeReasoning.V
	if r.StreamOptions != nil && !r.Stream.V {
		return &ParamError{Param: "stream_options", Code: CodeStreamOptionsNoStream,
			Message: "'stream_options' is only allowed when 'stream' is true."}
	}
	if err := validateSampling(r, &dst.Sampling); err != nil {
		return err
	}
	if err := r.VLLMUnsupported.check(); err != nil {
		return err
	}
	if err := r.chatUnsupported(); err != nil {
		return err
	}
	if err := streamInterval(r.StreamInterval, dst); err != nil {
		return err
	}
	if err := checkRequestID(r.RequestID); err != nil {
		return err
	}
	if err := refusedVLLM(r.UseBeamSearch, r.ChatTemplate.Defined || kwargsTemplate(r.ChatTemplateKwargs), false, r.TruncatePrompt); err != nil {
		return err
	}
	if err := r.toEngineTools(dst); err != nil {
		return err
	}
	v := vllmSampling{r.BadWords, r.AllowedTokenIDs, r.Priority, r.StructuredOutputs, r.CacheSalt, r.SessionID, r.VLLMXArgs}
	if err := v.toEngine(dst); err != nil {
		return err
	}
	if dst.ResponseFormat.Type != engine.FormatText && dst.ToolChoice.Mode == engine.ToolChoiceNamed {
		return &ParamError{Param: "structured_outputs", Code: CodeInvalidValue,
			Message: "You can only either use constraints for structured outputs or tools, not both."}
	}
	if err := r.ResponseFormat.toEngine(dst); err != nil {
		return err
	}
	switch r.ReasoningEffort {
	case "":
	case "none":
		dst.Reasoning = engine.Reasoning{}
	case "minimal", "low", "medium", "high":
		dst.Reasoning = engine.Reasoning{Enabled: true, Effort: r.ReasoningEffort}
	default:
		return &ParamError{Param: "reasoning_effort", Code: CodeInvalidValue,
			Message: "'reasoning_effort' must be one of \"minimal\", \"low\", \"medium\", \"high\" (got " + quoteValue(r.ReasoningEffort) + ")."}
	}
	if len(r.ChatTemplateKwargs) > 0 {
		if !r.ChatTemplateKwargs.IsObject() {
			return &ParamError{Param: "chat_template_kwargs", Code: CodeInvalidType,
				Message: "'chat_template_kwargs' must be an object."}
		}
		// A copy: the decoded request is pooled once the engine starts.
		dst.ChatTemplateKwargs = bytes.Clone(r.ChatTemplateKwargs)
	}
	if err := r.toEnginePrefill(dst); err != nil {
		return err
	}
	return r.toEngineMessages(dst)
}

// toEnginePrefill checks add_generation_prompt and continue_final_message
// as vLLM does: both true is an error (add_generation_prompt defaults to
// true, so continuing needs it false), and continuing needs a final
// assistant message to continue.
func (r *ChatRequest) toEnginePrefill(dst *engine.Request) *ParamError {
	addGen := !r.AddGenerationPrompt.Defined || r.AddGenerationPrompt.V
	if r.ContinueFinalMessage {
		if addGen {
			return &ParamError{Param: "continue_final_message", Code: CodeInvalidValue,
				Message: "Cannot set both `continue_final_message` and `add_generation_prompt` to True."}
		}
		if last := &r.Messages[len(r.Messages)-1]; last.Role != "assistant" {
			return &ParamError{Param: "continue_final_message", Code: CodeInvalidValue,
				Message: "'continue_final_message' needs the final message to be an assistant message (got " + quoteValue(last.Role) + ")."}
		}
	}
	dst.NoGenerationPrompt, dst.ContinueFinalMessage = !addGen, r.ContinueFinalMessage
	dst.SpecialTokens = specialTokens(r.AddSpecialTokens)
	return nil
}

// checkMinTokens checks min_tokens (vLLM extension) against s.MaxTokens,
// already set, and sets it in s. vLLM's words; 0 means none.
func checkMinTokens(v opt.Int, s *engine.Sampling) *ParamError {
	if !v.Defined {
		return nil
	}
	if v.V < 0 {
		return &ParamError{Param: "min_tokens", Code: CodeInvalidValue,
			Message: "min_tokens must be greater than or equal to 0, got " + strconv.Itoa(v.V) + "."}
	}
	if s.MaxTokens > 0 && v.V > s.MaxTokens {
		return &ParamError{Param: "min_tokens", Code: CodeInvalidValue,
			Message: "min_tokens must be less than or equal to max_tokens=" + strconv.Itoa(s.MaxTokens) + ", got " + strconv.Itoa(v.V) + "."}
	}
	s.MinTokens = v.V
	return nil
}

// samplingRanges checks temperature, top_p and top_k, which chat and
// completions share, and sets them in s.
func samplingRanges(s *engine.Sampling, temperature, topP opt.Float64, topK opt.Int) *ParamError {
	if temperature.Defined {
		if !(temperature.V >= 0 && temperature.V <= 2) {
			return rangeError("temperature", "a number from 0 to 2", fmtFloat(temperature.V))
		}
		s.Temperature = temperature.V
	}
	if topP.Defined {
		if !(topP.V > 0 && topP.V <= 1) {
			return rangeError("top_p", "a number greater than 0 and at most 1", fmtFloat(topP.V))
		}
		s.TopP = topP.V
	}
	if topK.Defined {
		// vLLM: -1 (and 0) disable top-k.
		if topK.V < -1 {
			return rangeError("top_k", "-1 (off) or a non-negative integer", strconv.Itoa(topK.V))
		}
		if topK.V > 0 {
			s.TopK = topK.V
		}
	}
	return nil
}

// checkPenalty applies OpenAI's range to frequency_penalty or
// presence_penalty (NaN is out of range).
func checkPenalty(param string, p opt.Float64) *ParamError {
	if p.Defined && !(p.V >= -2 && p.V <= 2) {
		return rangeError(param, "a number from -2 to 2", fmtFloat(p.V))
	}
	return nil
}

func validateSampling(r *ChatRequest, s *engine.Sampling) *ParamError {
	*s = engine.Sampling{N: 1, Temperature: 1, TopP: 1}
	if r.N.Defined {
		if r.N.V < 1 || r.N.V > MaxChoices {
			return rangeError("n", "an integer from 1 to "+strconv.Itoa(MaxChoices), strconv.Itoa(r.N.V))
		}
		s.N = r.N.V
	}
	if err := samplingRanges(s, r.Temperature, r.TopP, r.TopK); err != nil {
		return err
	}
	pp := penaltyParams{r.FrequencyPenalty, r.PresencePenalty, r.RepetitionPenalty, r.MinP, &r.LogitBias}
	if err := toEnginePenalties(s, pp); err != nil {
		return err
	}
	s.Unset = unset(r.Temperature, r.TopP, r.TopK, pp, r.MaxTokens.Defined || r.MaxCompletionTokens.Defined)
	if r.Seed.Defined {
		s.Seed, s.HasSeed = r.Seed.V, true
	}
	if r.MaxTokens.Defined {
		if r.MaxTokens.V < 1 {
			return rangeError("max_tokens", "an integer of at least 1", strconv.Itoa(r.MaxTokens.V))
		}
		s.MaxTokens = r.MaxTokens.V
	}
	if r.MaxCompletionTokens.Defined {
		if r.MaxCompletionTokens.V < 1 {
			return rangeError("max_completion_tokens", "an integer of at least 1", strconv.Itoa(r.MaxCompletionTokens.V))
		}
		s.MaxTokens = r.MaxCompletionTokens.V
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
	s.Logprobs = r.Logprobs.V
	if r.TopLogprobs.Defined {
		if r.TopLogprobs.V < 0 || r.TopLogprobs.V > engine.MaxTopLogprobs {
			return rangeError("top_logprobs", "an integer from 0 to 20", strconv.Itoa(r.TopLogprobs.V))
		}
		if r.TopLogprobs.V > 0 && !r.Logprobs.V {
			return &ParamError{Param: "top_logprobs", Code: CodeTopLogprobsNeedsLogprb,
				Message: "'top_logprobs' requires 'logprobs' to be true."}
		}
		s.TopLogprobs = r.TopLogprobs.V
	}
	return nil
}

// validateStop checks and copies the stop strings and stop token ids. Empty
// stop strings are dropped (they would end every choice at once).
func validateStop(stop StopList, ids []int, s *engine.Sampling) *ParamError {
	if len(stop) > MaxStop {
		return rangeError("stop", "at most "+strconv.Itoa(MaxStop)+" strings", strconv.Itoa(len(stop))+" strings")
	}
	for _, v := range stop {
		if v != "" {
			s.Stop = append(s.Stop, v)
		}
	}
	if len(ids) > MaxStopTokenIDs {
		return rangeError("stop_token_ids", "at most "+strconv.Itoa(MaxStopTokenIDs)+" ids", strconv.Itoa(len(ids))+" ids")
	}
	for i, id := range ids {
		if id < 0 {
			return rangeError("stop_token_ids["+strconv.Itoa(i)+"]", "a non-negative token id", strconv.Itoa(id))
		}
	}
	s.StopTokenIDs = ids
	return nil
}

func (r *ChatRequest) toEngineTools(dst *engine.Request) *ParamError {
	if len(r.Tools) > MaxTools {
		return rangeError("tools", "at most "+strconv.Itoa(MaxTools)+" tools", strconv.Itoa(len(r.Tools))+" tools")
	}
	if len(r.Tools) > 0 {
		dst.Tools = make([]engine.Tool, len(r.Tools))
	}
	for i := range r.Tools {
		t := &r.Tools[i]
		p := "tools[" + strconv.Itoa(i) + "]"
		if t.Type != "function" {
			return &ParamError{Param: p + ".type", Code: CodeInvalidValue,
				Message: "Tool type must be \"function\" (got " + quoteValue(t.Type) + ")."}
		}
		if err := checkToolName(p+".function.name", t.Function.Name); err != nil {
			return err
		}
		for j := range i {
			if r.Tools[j].Function.Name == t.Function.Name {
				return &ParamError{Param: p + ".function.name", Code: CodeInvalidValue,
					Message: "Duplicate function name " + quoteValue(t.Function.Name) + " in 'tools'."}
			}
		}
		if t.Function.Parameters != nil && !t.Function.Parameters.IsObject() {
			return &ParamError{Param: p + ".function.parameters", Code: CodeInvalidType,
				Message: "A function's 'parameters' must be a JSON Schema object."}
		}
		dst.Tools[i] = engine.Tool{Name: t.Function.Name, Description: t.Function.Description,
			Parameters: t.Function.Parameters}
	}
	dst.ParallelToolCalls = r.ParallelToolCalls.Get(true)

	tc := r.ToolChoice
	switch {
	case !tc.Set || tc.Mode == "auto":
		dst.ToolChoice = engine.ToolChoice{Mode: engine.ToolChoiceAuto}
	case tc.Mode == "none":
		dst.ToolChoice = engine.ToolChoice{Mode: engine.ToolChoiceNone}
	case tc.Mode == "required":
		if len(r.Tools) == 0 {
			return &ParamError{Param: "tool_choice", Code: CodeInvalidValue,
				Message: "'tool_choice' \"required\" needs 'tools' to be specified."}
		}
		dst.ToolChoice = engine.ToolChoice{Mode: engine.ToolChoiceRequired}
	case tc.Mode == "function":
		if tc.Name == "" {
			return &ParamError{Param: "tool_choice.function.name", Code: CodeMissing,
				Message: "'tool_choice.function.name' is required."}
		}
		found := false
		for i := range r.Tools {
			found = found || r.Tools[i].Function.Name == tc.Name
		}
		if !found {
			return &ParamError{Param: "tool_choice", Code: CodeUnknownTool,
				Message: "'tool_choice' names function " + quoteValue(tc.Name) + ", which is not in 'tools'."}
		}
		dst.ToolChoice = engine.ToolChoice{Mode: engine.ToolChoiceNamed, Name: tc.Name}
	default:
		return &ParamError{Param: "tool_choice", Code: CodeInvalidValue,
			Message: "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\":\"function\",\"function\":{\"name\":...}} (got " + quoteValue(tc.Mode) + ")."}
	}
	return nil
}

// checkToolName applies OpenAI's rule for function names: ^[a-zA-Z0-9_-]{1,64}$.
func checkToolName(param, name string) *ParamError {
	ok := len(name) >= 1 && len(name) <= maxToolNameLen
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if !ok {
		return &ParamError{Param: param, Code: CodeInvalidValue,
			Message: "A function name must be 1 to 64 characters of a-z, A-Z, 0-9, '_' or '-' (got " + quoteValue(name) + ")."}
	}
	return nil
}

// toEngine sets dst.ResponseFormat from f (chat, and vLLM's completions).
func (f *ChatResponseFormat) toEngine(dst *engine.Request) *ParamError {
	switch f.Type {
	case "", "text":
		// structured_outputs's, if any
	case "json_object":
		dst.ResponseFormat = engine.ResponseFormat{Type: engine.FormatJSONObject}
	case "json_schema":
		if f.JSONSchema == nil {
			return &ParamError{Param: "response_format.json_schema", Code: CodeMissing,
				Message: "'response_format.json_schema' is required when the type is \"json_schema\"."}
		}
		if f.JSONSchema.Name == "" {
			return &ParamError{Param: "response_format.json_schema.name", Code: CodeMissing,
				Message: "'response_format.json_schema.name' is required."}
		}
		if f.JSONSchema.Schema != nil && !f.JSONSchema.Schema.IsObject() {
			return &ParamError{Param: "response_format.json_schema.schema", Code: CodeInvalidType,
				Message: "'response_format.json_schema.schema' must be a JSON Schema object."}
		}
		dst.ResponseFormat = engine.ResponseFormat{Type: engine.FormatJSONSchema,
			Name: f.JSONSchema.Name, Schema: f.JSONSchema.Schema}
	default:
		return &ParamError{Param: "response_format.type", Code: CodeInvalidValue,
			Message: "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\" (got " + quoteValue(f.Type) + ")."}
	}
	return nil
}

func (r *ChatRequest) toEngineMessages(dst *engine.Request) *ParamError {
	msgs := dst.Messages[:0]
	if cap(msgs) < len(r.Messages) {
		msgs = make([]engine.Message, 0, len(r.Messages))
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		p := "messages[" + strconv.Itoa(i) + "]"
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		case "":
			return &ParamError{Param: p + ".role", Code: CodeMissing, Message: "Each message needs a 'role'."}
		default:
			return &ParamError{Param: p + ".role", Code: CodeInvalidValue,
				Message: "'role' must be \"system\", \"developer\", \"user\", \"assistant\" or \"tool\" (got " + quoteValue(m.Role) + ")."}
		}
		c := &m.Content
		if c.HasBad {
			return &ParamError{Param: p + ".content[" + strconv.Itoa(c.BadPart) + "]", Code: CodeUnsupportedContent,
				Message: "Content parts of type " + quoteValue(c.BadType) + " are not supported: this model accepts text parts only."}
		}
		if !c.Set && m.Role != "assistant" {
			return &ParamError{Param: p + ".content", Code: CodeMissing,
				Message: "A " + m.Role + " message needs 'content'."}
		}
		em := engine.Message{Role: m.Role, Content: c.Text, Name: m.Name}
		switch m.Role {
		case "tool":
			if m.ToolCallID == "" {
				return &ParamError{Param: p + ".tool_call_id", Code: CodeMissing,
					Message: "A tool message needs 'tool_call_id'."}
			}
			em.ToolCallID = m.ToolCallID
		case "assistant":
			em.Reasoning = m.ReasoningContent
			if em.Reasoning == "" {
				em.Reasoning = m.Reasoning
			}
			if len(m.ToolCalls) > 0 {
				em.ToolCalls = make([]engine.ToolCall, len(m.ToolCalls))
			}
			for j := range m.ToolCalls {
				tc := &m.ToolCalls[j]
				if tc.Function.Name == "" {
					return &ParamError{Param: p + ".tool_calls[" + strconv.Itoa(j) + "].function.name", Code: CodeMissing,
						Message: "A tool call needs 'function.name'."}
				}
				em.ToolCalls[j] = engine.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
			}
		}
		msgs = append(msgs, em)
	}
	dst.Messages = msgs
	return nil
}

func rangeError(param, want, got string) *ParamError {
	return &ParamError{Param: param, Code: CodeInvalidValue,
		Message: "'" + param + "' must be " + want + " (got " + got + ")."}
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// detokenizeOptions copies vLLM's skip_special_tokens and
// spaces_between_special_tokens (both default true) into s.
func detokenizeOptions(s *engine.Sampling, skip, spaces opt.Bool) {
	s.KeepSpecialTokens = skip.Defined && !skip.V
	s.NoSpecialTokenSpaces = spaces.Defined && !spaces.V
}

// specialTokens is vLLM's add_special_tokens as the engine takes it.
func specialTokens(b opt.Bool) engine.SpecialTokens {
	switch {
	case !b.Defined:
		return engine.SpecialTokensDefault
	case b.V:
		return engine.SpecialTokensAdd
	}
	return engine.SpecialTokensNone
}

// chatUnsupported refuses vLLM's chat-only options whose effect this
// server does not provide (see VLLMUnsupported).
func (r *ChatRequest) chatUnsupported() *ParamError {
	var param, hint string
	switch {
	case r.Echo.V:
		param, hint = "echo", "the answer does not repeat the last message; prepend it on the client"
	case r.Documents.Set:
		param, hint = "documents", "the chat template is given no documents; put them in the messages"
	case r.ReturnPromptText.V:
		param, hint = "return_prompt_text", "POST /tokenize with the messages gives the prompt's tokens"
	default:
		return nil
	}
	return unsupported(param, hint)
}
