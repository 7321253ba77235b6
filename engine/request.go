package engine

import "time"

// Request is a structured generation request, independent of the API dialect
// it came in. The dialect fills it; Engine.Prepare completes PromptTokens.
type Request struct {
	// ID identifies the request in logs and metrics (X-Request-Id).
	ID    string
	Model string

	// The prompt: Messages for chat-style APIs (rendered by the engine's
	// template), else Prompt text, else PromptTokens given directly. An
	// engine reads Messages, Prompt, Tools, ToolChoice and ResponseFormat
	// only in Prepare and Start, keeping what it needs: once Start has
	// returned, the caller may drop them (a held stream should not keep its
	// whole conversation alive).
	Messages []Message
	Prompt   string
	// PromptTokens are the prompt's token ids: int32, as every tokenizer's
	// ids fit in one (llama.cpp's llama_token is an int32), at half the
	// memory of []int. A held stream keeps them for its Result, so they
	// are a large part of what it costs.
	PromptTokens []int32
	// CachedTokens is set by the engine at admission: prompt tokens found in
	// the prefix cache.

	// Audio, when it holds samples, makes the request a transcription
	// instead of a generation: the engine transcribes the audio and
	// streams the transcript as answer text through the same Formatter
	// and Sink (Messages, Prompt and PromptTokens are left empty; the
	// engine fills PromptTokens with the audio's tokens, which the usage
	// counts as prompt tokens). Read in Prepare and Start only, like
	// Messages. An engine without speech recognition refuses it in
	// Prepare with KindInvalid.
	Audio Audio

	Tools      []Tool
	ToolChoice ToolChoice
	// ParallelToolCalls allows more than one call per turn.
	ParallelToolCalls bool

	ResponseFormat ResponseFormat
	Reasoning      Reasoning
	// ChatTemplateKwargs is a JSON object of extra variables for the chat
	// template (vLLM's chat_template_kwargs, e.g. {"enable_thinking":
	// false}); nil when none. Read in Prepare only, like Messages.
	ChatTemplateKwargs []byte
	// NoGenerationPrompt renders the chat template with
	// add_generation_prompt false (vLLM's add_generation_prompt, whose
	// default is true): no assistant header is opened after the messages.
	// Read in Prepare only, like Messages.
	NoGenerationPrompt bool
	// ContinueFinalMessage (vLLM's continue_final_message) renders the
	// final message, an assistant turn, open: the prompt ends with its
	// content, without the template's end-of-turn, so that the model
	// continues it (assistant prefill). The dialect sets it only with
	// NoGenerationPrompt and a final assistant message. Read in Prepare
	// only, like Messages.
	ContinueFinalMessage bool
	// SpecialTokens is vLLM's add_special_tokens: whether the prompt text
	// gets the tokenizer's special tokens (its BOS). Read in Prepare only.
	SpecialTokens SpecialTokens
	Sampling      Sampling

	// Echo puts the prompt before the completion (completions API).
	Echo bool
	// ReturnTokenIDs puts the prompt's token ids and each choice's
	// generated ids in the response (vLLM's return_token_ids). Read by the
	// dialect only: every engine hands the ids over anyway.
	ReturnTokenIDs bool
	// HideReasoning leaves the reasoning out of the answer (vLLM's
	// include_reasoning false). Read by the dialect only.
	HideReasoning bool
	// PromptLogprobs asks for this many top logprobs per prompt token
	// (completions with echo); 0 means none. -1 means the prompt token's
	// own logprob only.
	PromptLogprobs int

	// Stream selects streamed output: each step's frames reach the Sink.
	// Without it only the final Result does. A streamed request carries
	// both a Formatter (the dialect's Go frame writer) and StreamInfo (the
	// constant parts of its frames, for an engine that writes its own; see
	// StreamInfo); an engine uses one or the other.
	Stream     bool
	Formatter  Formatter
	StreamInfo StreamInfo
	// StreamInterval coalesces up to this many tokens per frame (vLLM's
	// --stream-interval); 0 or 1 means one frame per token.
	StreamInterval int

	// VLLM holds vLLM's extensions the request uses (structured_outputs
	// regex, choice and grammar, bad_words, allowed_token_ids, priority);
	// nil when none.
	VLLM *VLLMExtensions

	// Arrival is when the server received the request (for queue and TTFT
	// metrics); zero means "at Start".
	Arrival time.Time

	// Prepared is the engine's private state for this request, set by
	// Engine.Prepare (parsed schemas, prompt block hashes, ...) and read by
	// Engine.Start so that nothing is parsed twice. Callers leave it alone;
	// an engine that finds it nil (or not its own) prepares again in Start.
	Prepared any
}

// Audio is input audio: 16-bit signed little-endian PCM, mono.
type Audio struct {
	PCM        []byte
	SampleRate int // samples per second
}

// Samples is the number of whole samples in a.
func (a *Audio) Samples() int { return len(a.PCM) / 2 }

// Duration is how long a plays; 0 without a sample rate.
func (a *Audio) Duration() time.Duration {
	if a.SampleRate <= 0 {
		return 0
	}
	return time.Duration(a.Samples()) * time.Second / time.Duration(a.SampleRate)
}

// Message is one turn of a conversation.
type Message struct {
	Role string // system, developer, user, assistant, tool
	// Content is the text content; content parts are concatenated by the
	// dialect in order (text parts only; others are refused by the dialect).
	Content    string
	Name       string
	ToolCalls  []ToolCall
	ToolCallID string
	// Reasoning is prior reasoning text of an assistant turn, if kept.
	Reasoning string
}

// ToolCall is a call the model made.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the function's JSON Schema, as raw JSON; may be nil.
	Parameters []byte
}

// ToolChoiceMode says whether and how the model must call a tool.
type ToolChoiceMode uint8

const (
	ToolChoiceAuto ToolChoiceMode = iota // call a tool when the user asks for one by name
	ToolChoiceNone
	ToolChoiceRequired // call some tool
	ToolChoiceNamed    // call the tool named in ToolChoice.Name
)

// ToolChoice constrains tool calls.
type ToolChoice struct {
	Mode ToolChoiceMode
	Name string
}

// ResponseFormatType is the requested shape of the answer.
type ResponseFormatType uint8

const (
	FormatText ResponseFormatType = iota
	FormatJSONObject
	FormatJSONSchema
	// FormatRegex: the answer matches the regular expression
	// Request.VLLM.Pattern, whole (vLLM's structured_outputs.regex).
	FormatRegex
	// FormatChoice: the answer is exactly one of Request.VLLM.Choices
	// (vLLM's structured_outputs.choice).
	FormatChoice
	// FormatGrammar: the answer is a sentence of the grammar
	// Request.VLLM.Pattern, from its rule root, in GBNF or xgrammar's
	// EBNF (vLLM's structured_outputs.grammar).
	FormatGrammar
)

// ResponseFormat constrains the answer's text.
type ResponseFormat struct {
	Type ResponseFormatType
	Name string
	// Schema is the JSON Schema (raw JSON) for FormatJSONSchema.
	Schema []byte
}

// VLLMExtensions are vLLM's request extensions that few requests carry.
// The dialect allocates them only for a request that has one, so that a
// held stream pays one pointer for them (Request.VLLM).
type VLLMExtensions struct {
	// Pattern is FormatRegex's regular expression or FormatGrammar's
	// grammar; Choices are FormatChoice's answers.
	Pattern string
	Choices []string
	// BadWords (bad_words) are words the choice never generates: each,
	// as the tokenizer encodes it alone and after a space, is banned as
	// a whole sequence (its last token is banned where the output so far
	// ends with the others).
	BadWords []string
	// AllowedTokenIDs (allowed_token_ids), when not nil, are the only
	// tokens the choice may generate; never empty.
	AllowedTokenIDs []int
	// Priority orders the engine's waiting queue under priority
	// scheduling (lower first; 0 = default).
	Priority int
	// PinRank pins the request to data-parallel rank DataParallelRank
	// (vLLM's X-data-parallel-rank header): only that rank's engine runs
	// it. An engine without ranks is rank 0 of 1, as vLLM with one.
	PinRank          bool
	DataParallelRank int
	// CacheSalt (cache_salt) isolates the request's prefix cache: only
	// requests with the same salt share cached blocks ("" = none).
	CacheSalt string
	// SessionID (session_id, or the X-Session-ID header) names the
	// conversation or agent session the request belongs to: vLLM's engine
	// core puts it on the KV cache events of the request's blocks, for a
	// router that follows sessions. It changes nothing in the answer; the
	// engines that publish no such events ignore it ("" = none).
	// SessionFromXArgs: SessionID came from vllm_xargs.session_id, the
	// weakest of vLLM's three spellings (an X-Session-ID header replaces
	// it).
	SessionID        string
	SessionFromXArgs bool
	// ExtraArgs (vllm_xargs) are extra arguments for a vLLM engine's
	// custom extensions (its logits processors read them from
	// SamplingParams.extra_args): a JSON object of strings, numbers and
	// lists of them, nil when none. Only an engine that passes them on
	// takes the request (engine.CapExtraArgs).
	ExtraArgs []byte
}

// Reasoning asks for reasoning tokens before the answer.
type Reasoning struct {
	Enabled bool
	// Effort is "minimal", "low", "medium" or "high" (OpenAI); empty means medium.
	Effort string
	// BudgetTokens caps reasoning tokens (Anthropic thinking); 0 means from Effort.
	BudgetTokens int
}

// Sampling holds the sampling parameters.
type Sampling struct {
	// N is the number of independent choices; 0 means 1.
	N           int
	Temperature float64 // 0 = greedy, fully deterministic
	TopP        float64 // 0 means 1
	TopK        int     // 0 means off
	Seed        int64
	HasSeed     bool
	// Unset marks the fields the client left out, which the model's
	// generation defaults fill (SamplingDefaults.Apply): the dialects set
	// it. The zero value, every field as set (a request an embedder
	// builds), takes no default.
	Unset SamplingField
	// MaxTokens caps generated tokens per choice; 0 means up to the context.
	MaxTokens int
	// IgnoreEOS generates exactly MaxTokens (vLLM's extension).
	IgnoreEOS bool
	// KeepSpecialTokens puts the text of special (control) tokens in the
	// output (vLLM's skip_special_tokens=false); by default they are left
	// out, except the markers the request's reasoning and tool-call
	// parsers look for, which the parsers consume. The tokens that end
	// generation (EOS, stop_token_ids) are never output.
	KeepSpecialTokens bool
	// NoSpecialTokenSpaces is vLLM's spaces_between_special_tokens=false:
	// consecutive special tokens' texts are joined with no space between
	// them. Vajra's own detokenization never inserts one (it joins token
	// pieces, as vLLM's fast detokenizer does), so this only reaches
	// workers that detokenize themselves (vLLM, SGLang).
	NoSpecialTokenSpaces bool
	// MinTokens (vLLM's min_tokens; 0 = none, at most MaxTokens) is the
	// least number of tokens a choice generates before an end-of-generation
	// token, a stop token id or a stop string may end it: the engine bans
	// the end-of-generation and stop tokens while fewer have been
	// generated, and looks for stop strings only in text that ends after
	// them. MaxTokens still ends a choice.
	MinTokens int
	// Stop strings end a choice and are trimmed from its output; never is a
	// part of one emitted (hold-back).
	Stop         []string
	StopTokenIDs []int
	// IncludeStopStr (vLLM's include_stop_str_in_output) keeps the matched
	// stop string at the end of the output instead of trimming it.
	IncludeStopStr bool
	// Logprobs asks for per-token logprobs, with TopLogprobs (0..20)
	// alternatives each.
	Logprobs    bool
	TopLogprobs int

	// Penalties and biases, applied in vLLM's order to the model's logits
	// before temperature: LogitBias, then RepetitionPenalty, then
	// FrequencyPenalty and PresencePenalty. Their zero values are off.
	//
	// FrequencyPenalty and PresencePenalty (OpenAI; each -2..2, 0 = off)
	// lower the logit of every token the choice has generated so far by
	// count*FrequencyPenalty + PresencePenalty, where count is how often it
	// was generated (prompt tokens do not count); negative values favour
	// repeats.
	FrequencyPenalty float64
	PresencePenalty  float64
	// RepetitionPenalty (vLLM's extension, the formula of Hugging Face's
	// transformers; > 0, 1 = off, 0 = unset, meaning 1) divides the
	// positive logits, and multiplies the negative ones, of every token
	// found in the prompt or in the choice's output so far.
	RepetitionPenalty float64
	// MinP (vLLM's extension; 0..1, 0 = off) drops, when sampling at a
	// temperature above 0, the tokens whose probability is below MinP
	// times the most likely token's; 1 keeps the most likely only.
	MinP float64
	// LogitBias (OpenAI; each bias -100..100) is added to the logits of the
	// given token ids, which are ids of the engine's tokenizer (the engine's
	// Prepare refuses ids outside its vocabulary). -100 in effect bans a
	// token, 100 in effect forces it. Dialects give it sorted by TokenID,
	// each id once; nil means none.
	LogitBias []TokenBias
}

// TokenBias is one entry of Sampling.LogitBias.
type TokenBias struct {
	TokenID int
	Bias    float64
}

// Choices returns the number of choices asked for (at least 1).
func (s *Sampling) Choices() int {
	if s.N < 1 {
		return 1
	}
	return s.N
}

// MaxTopLogprobs is the most alternatives per token any dialect may ask for.
const MaxTopLogprobs = 20

// SpecialTokens is vLLM's add_special_tokens.
type SpecialTokens uint8

const (
	// SpecialTokensDefault: the API's default. Completions add the BOS
	// token when the model's prompts begin with one; chat adds it only
	// when the chat template did not write it (as llama-server does;
	// vLLM's templates write it).
	SpecialTokensDefault SpecialTokens = iota
	// SpecialTokensAdd (add_special_tokens true): the BOS token when the
	// model's prompts begin with one, on top of what a chat template
	// wrote.
	SpecialTokensAdd
	// SpecialTokensNone (add_special_tokens false): the text's tokens only.
	SpecialTokensNone
)
