package engine

import "strconv"

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
	// CapGrammar: an answer constrained by a regular expression, a list
	// of choices or a grammar (vLLM's structured_outputs regex, choice
	// and grammar).
	CapGrammar
	// CapBadWords: vLLM's bad_words.
	CapBadWords
	// CapAllowedTokenIDs: vLLM's allowed_token_ids.
	CapAllowedTokenIDs
	// CapPriority: a priority other than 0 (vLLM's priority scheduling).
	CapPriority
	// CapCacheSalt: vLLM's cache_salt, a prefix cache per salt.
	CapCacheSalt
	// CapExtraArgs: vLLM's vllm_xargs, passed to the engine's custom
	// extensions (SamplingParams.extra_args).
	CapExtraArgs
)

// Lacker is an Engine that declares the capabilities it lacks. Lacks may
// change while the engine runs (a remote engine learns its workers'
// model); safe for concurrent use.
type Lacker interface {
	Lacks() Capability
}

// Lacks returns the capabilities e declares it lacks (none when neither e
// nor an engine it wraps implements Lacker).
func Lacks(e Engine) Capability {
	if l, ok := As[Lacker](e); ok {
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
	switch req.ResponseFormat.Type {
	case FormatRegex, FormatChoice, FormatGrammar:
		c |= CapGrammar
	}
	if v := req.VLLM; v != nil {
		if len(v.BadWords) > 0 {
			c |= CapBadWords
		}
		if v.AllowedTokenIDs != nil {
			c |= CapAllowedTokenIDs
		}
		if v.Priority != 0 {
			c |= CapPriority
		}
		if v.CacheSalt != "" {
			c |= CapCacheSalt
		}
		if len(v.ExtraArgs) > 0 {
			c |= CapExtraArgs
		}
	}
	return c
}

// CheckCapabilities refuses req when it needs a capability of lacks:
// a KindInvalid error naming the capability and the request parameter,
// for the 400 before the stream; who names the engine in the message.
func CheckCapabilities(req *Request, lacks Capability, who string) error {
	missing := Needs(req) & lacks
	for _, c := range capabilities {
		if missing&c.c != 0 {
			return &Error{Kind: KindInvalid, Param: c.param, Message: who + " " + c.lack}
		}
	}
	return nil
}

// capabilities name each Capability's request parameter and say what
// an engine that lacks it does not do.
var capabilities = [...]struct {
	c     Capability
	param string
	lack  string
}{
	{CapPromptLogprobs, "logprobs", "do not return prompt logprobs (echo with logprobs, prompt_logprobs)"},
	{CapGrammar, "structured_outputs", "do not enforce regex, choice or grammar constraints (structured_outputs)"},
	{CapBadWords, "bad_words", "do not ban words (bad_words)"},
	{CapAllowedTokenIDs, "allowed_token_ids", "do not restrict the output to given tokens (allowed_token_ids)"},
	{CapPriority, "priority", "do not schedule by priority (priority must be 0)"},
	{CapCacheSalt, "cache_salt", "do not salt the prefix cache (cache_salt)"},
	{CapExtraArgs, "vllm_xargs", "run no custom extensions to pass vllm_xargs to (vllm_xargs)"},
}

// CheckRank refuses a request pinned to a data-parallel rank outside
// [0, ranks) with vLLM's message (a KindInvalid error); an engine without
// ranks passes 1, as vLLM with one rank accepts only rank 0. ranks <= 0
// checks only that the rank is not negative (the number of ranks is not
// known: engines attach while Vajra runs).
func CheckRank(req *Request, ranks int) error {
	v := req.VLLM
	if v == nil || !v.PinRank || (v.DataParallelRank >= 0 && (ranks <= 0 || v.DataParallelRank < ranks)) {
		return nil
	}
	msg := "data_parallel_rank " + strconv.Itoa(v.DataParallelRank) + " is out of range"
	if ranks > 0 {
		msg += " [0, " + strconv.Itoa(ranks) + ")."
	} else {
		msg += ": ranks are not negative."
	}
	return &Error{Kind: KindInvalid, Param: "X-data-parallel-rank", Message: msg}
}

// OutputParser is an Engine that says whether it parses its model's
// output into reasoning, answer and tool calls: a reasoning or tool-call
// parser is set (--reasoning-parser, --tool-call-parser), or its model
// reasons as the simulator's does. vLLM then hides, for a request with
// include_reasoning false, not only the reasoning but every generated
// token's ids and logprobs (they would show the reasoning's tokens), in
// the stream and in the answer; without a parser it shows them.
type OutputParser interface {
	ParsesOutput() bool
}

// ParsesOutput reports whether e parses its model's output (false when
// neither e nor an engine it wraps implements OutputParser).
func ParsesOutput(e Engine) bool {
	p, ok := As[OutputParser](e)
	return ok && p.ParsesOutput()
}
