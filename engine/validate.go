package engine

import "strconv"

// CheckRequest makes the checks every engine makes in Prepare, before any
// status line: the ranges of req's sampling parameters and its tool
// choice. maxN is the most choices the engine runs for one request and
// maxStops the most stop strings it takes. Engine-specific checks (token
// ids against a vocabulary, ...) are the engine's own.
func CheckRequest(req *Request, maxN, maxStops int) *Error {
	sp := &req.Sampling
	switch {
	case sp.N < 0 || sp.N > maxN:
		return invalid("n", "n must be between 1 and "+strconv.Itoa(maxN)+", got "+strconv.Itoa(sp.N))
	case sp.Temperature < 0:
		return invalid("temperature", "temperature must not be negative, got "+strconv.FormatFloat(sp.Temperature, 'g', -1, 64))
	case sp.TopP < 0 || sp.TopP > 1:
		return invalid("top_p", "top_p must be in [0, 1], got "+strconv.FormatFloat(sp.TopP, 'g', -1, 64))
	case sp.TopK < 0:
		return invalid("top_k", "top_k must not be negative, got "+strconv.Itoa(sp.TopK))
	case sp.MaxTokens < 0:
		return invalid("max_tokens", "max_tokens must be at least 1, got "+strconv.Itoa(sp.MaxTokens))
	case sp.MinTokens < 0:
		return invalid("min_tokens", "min_tokens must be greater than or equal to 0, got "+strconv.Itoa(sp.MinTokens))
	case sp.MaxTokens > 0 && sp.MinTokens > sp.MaxTokens:
		return invalid("min_tokens", "min_tokens must be less than or equal to max_tokens="+strconv.Itoa(sp.MaxTokens)+", got "+strconv.Itoa(sp.MinTokens))
	case req.ContinueFinalMessage && !req.NoGenerationPrompt:
		return invalid("continue_final_message", "Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
	case req.ContinueFinalMessage && (len(req.Messages) == 0 || req.Messages[len(req.Messages)-1].Role != "assistant"):
		return invalid("continue_final_message", "continue_final_message needs the final message to be an assistant message")
	case sp.TopLogprobs < 0 || sp.TopLogprobs > MaxTopLogprobs:
		return invalid("top_logprobs", "top_logprobs must be between 0 and 20, got "+strconv.Itoa(sp.TopLogprobs))
	case sp.TopLogprobs > 0 && !sp.Logprobs:
		return invalid("top_logprobs", "top_logprobs requires logprobs")
	case req.PromptLogprobs < -1 || req.PromptLogprobs > MaxTopLogprobs:
		return invalid("logprobs", "prompt logprobs must be between 0 and 20, got "+strconv.Itoa(req.PromptLogprobs))
	case len(sp.Stop) > maxStops:
		return invalid("stop", "at most "+strconv.Itoa(maxStops)+" stop strings are allowed, got "+strconv.Itoa(len(sp.Stop)))
	case req.ToolChoice.Mode == ToolChoiceRequired && len(req.Tools) == 0:
		return invalid("tool_choice", "tool_choice required needs at least one tool")
	case req.ToolChoice.Mode == ToolChoiceNamed && !hasTool(req.Tools, req.ToolChoice.Name):
		return invalid("tool_choice", "tool_choice names a function that is not among the tools")
	case req.Reasoning.BudgetTokens < 0:
		return invalid("reasoning", "the reasoning budget must not be negative")
	}
	return nil
}

func hasTool(tools []Tool, name string) bool {
	for i := range tools {
		if tools[i].Name == name {
			return true
		}
	}
	return false
}

func invalid(param, msg string) *Error {
	return &Error{Kind: KindInvalid, Param: param, Message: msg}
}

// CheckContext checks a prompt of n tokens against a context of limit
// tokens with maxTokens asked for (0: as many as fit), as vLLM words it,
// and returns the resolved cap on generated tokens: maxTokens, or the room
// left when it was 0. It fails with KindContextLength.
func CheckContext(n, limit, maxTokens int) (int, *Error) {
	switch {
	case maxTokens > 0 && n+maxTokens > limit:
		return 0, &Error{Kind: KindContextLength, Param: "max_tokens", Message: "This model's maximum context length is " +
			strconv.Itoa(limit) + " tokens. However, you requested " + strconv.Itoa(n+maxTokens) + " tokens (" +
			strconv.Itoa(n) + " in the messages, " + strconv.Itoa(maxTokens) +
			" in the completion). Please reduce the length of the messages or completion."}
	case maxTokens == 0 && n >= limit:
		return 0, &Error{Kind: KindContextLength, Param: "messages", Message: "This model's maximum context length is " +
			strconv.Itoa(limit) + " tokens. However, your messages resulted in " + strconv.Itoa(n) +
			" tokens, which leaves no room for the completion. Please reduce the length of the messages."}
	case maxTokens == 0:
		return limit - n, nil
	}
	return maxTokens, nil
}

// CheckMinTokens checks min_tokens against the resolved cap on generated
// tokens (CheckContext's, which for a request without max_tokens is the
// room the prompt leaves), as vLLM does once it has resolved max_tokens.
func CheckMinTokens(minTokens, maxTokens int) *Error {
	if minTokens > maxTokens {
		return invalid("min_tokens", "min_tokens must be less than or equal to max_tokens="+strconv.Itoa(maxTokens)+", got "+strconv.Itoa(minTokens))
	}
	return nil
}
