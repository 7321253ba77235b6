package engine

// Capability is a feature of a request that an engine may lack. An
// engine that lacks one declares it (Lacker) and refuses every request
// that needs it before the stream starts, with a KindInvalid error that
// names it (CheckCapabilities): a request is never served with the
// feature silently dropped.
type Capability uint32

const (
	// CapPromptLogprobs: the prompt's logprobs (completions with echo and
	// logprobs, vLLM's prompt_logprobs).
	CapPromptLogprobs Capability = 1 << iota
)

// Lacker is an Engine that declares the capabilities it lacks. Lacks may
// change while the engine runs (a remote engine learns its workers'
// model); safe for concurrent use.
type Lacker interface {
	Lacks() Capability
}

// Lacks returns the capabilities e declares it lacks (none when e does
// not implement Lacker).
func Lacks(e Engine) Capability {
	if l, ok := e.(Lacker); ok {
		return l.Lacks()
	}
	return 0
}

// Needs returns the capabilities req needs.
func Needs(req *Request) Capability {
	var c Capability
	if req.PromptLogprobs != 0 {
		c |= CapPromptLogprobs
	}
	return c
}

// CheckCapabilities refuses req when it needs a capability of lacks:
// a KindInvalid error naming the capability and the request parameter,
// for the 400 before the stream; who names the engine in the message.
func CheckCapabilities(req *Request, lacks Capability, who string) error {
	missing := Needs(req) & lacks
	if missing&CapPromptLogprobs != 0 {
		return &Error{Kind: KindInvalid, Param: "logprobs",
			Message: who + " do not return prompt logprobs (echo with logprobs, prompt_logprobs)"}
	}
	return nil
}
