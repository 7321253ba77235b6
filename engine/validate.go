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
