package pipeline

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/text"
	"github.com/vajra-go/vajra/engine/text/chattemplate"
	"github.com/vajra-go/vajra/engine/text/grammar"
)

// Model is what request preparation needs of a model: its tokenizer,
// vocabulary, chat templates, context length and grammar check. An
// engine implements it over what it loaded (llama.cpp's model, a remote
// worker's tokenizer). Safe for concurrent use: Prepare runs on the
// callers' goroutines.
type Model interface {
	// VocabSize is the number of token ids.
	VocabSize() int
	// MaxLen is the context length.
	MaxLen() int
	// Template is the chat template for a request; tools says the
	// request carries tools it may call (a tool-use template, when the
	// model has one).
	Template(tools bool) *chattemplate.Template
	// AddBOS says the model's prompts begin with its BOS token; BOSText
	// is that token's text ("" when none).
	AddBOS() bool
	BOSText() string
	// Tokenize appends the tokens of s to dst, after the BOS token when
	// bos and the model's prompts begin with one (AddBOS). A failure that is an *engine.Error is
	// returned as it is; any other is an internal error.
	Tokenize(dst []int32, s string, bos bool) ([]int32, error)
	// CheckGrammar reports whether the model's sampler (or its workers)
	// can enforce a GBNF grammar: an error is the request's 400, before
	// any byte of the answer. nil when the engine cannot tell.
	CheckGrammar(gbnf string) error
}

// Limits are the engine's own bounds on a request.
type Limits struct {
	// MaxN is the most choices per request; MaxStop the most stop strings.
	MaxN    int
	MaxStop int
	// ReasoningParser and ToolCallParser are the output parsers' names
	// (engine/text), "" for none.
	ReasoningParser string
	ToolCallParser  string
	// DefaultMaxTokens caps a request that gives no maximum
	// (engine.FieldMaxTokens unset) below the room its context leaves: the
	// model's generation default (engine.SamplingDefaults.MaxTokens); 0
	// = none.
	DefaultMaxTokens int
}

// FormatKind says what structured output a request asks for.
type FormatKind uint8

const (
	FormatNone FormatKind = iota
	// FormatJSONObject: any JSON object.
	FormatJSONObject
	// FormatJSONSchema: Schema holds the JSON Schema.
	FormatJSONSchema
	// FormatToolCall: a forced tool call's grammar.
	FormatToolCall
	// FormatGrammar: a regex, a list of choices or a grammar, as Grammar
	// says (structured_outputs).
	FormatGrammar
)

// MaxBadWords is the most token sequences bad_words may become (vLLM's
// VLLM_MAX_NUM_BAD_WORDS): each word alone and after a space.
const MaxBadWords = 128

// Prepared is a request prepared for any engine: its prompt, its limits,
// its output constraint and the options of its output parsers.
type Prepared struct {
	Prompt    []int32
	MaxTokens int
	// Format is the structured-output constraint; Grammar its GBNF
	// (llama.cpp's dialect), Schema the request's JSON Schema for
	// FormatJSONSchema. A forced tool call's grammar wins over
	// response_format.
	Format  FormatKind
	Grammar string
	Schema  []byte
	// Forced: tool_choice required or named (ForcedName).
	Forced     bool
	ForcedName string
	Parse      text.Options
	// BadWords are the token sequences of Sampling.BadWords, as vLLM's
	// front end makes them (SamplingParams.update_from_tokenizer): each
	// word with its leading spaces removed, then after one space when
	// that is another first token and as many tokens.
	BadWords [][]int32
}

// Prepare checks req against the engine's limits and the model's
// vocabulary, renders its prompt (the chat template for Messages),
// tokenizes it, checks it against the context, and turns tools,
// tool_choice and response_format into a constraint: the one preparation
// every engine shares. It sets req.PromptTokens when the request gave
// text. Errors are *engine.Error (KindInvalid, KindContextLength, ...).
func Prepare(m Model, req *engine.Request, lim Limits, p *Prepared) error {
	if err := engine.CheckRequest(req, lim.MaxN, lim.MaxStop); err != nil {
		return err
	}
	vocab := m.VocabSize()
	sp := &req.Sampling
	for _, b := range sp.LogitBias {
		if b.TokenID < 0 || b.TokenID >= vocab {
			return invalid("logit_bias", "logit_bias names token "+strconv.Itoa(b.TokenID)+", outside the vocabulary (0.."+strconv.Itoa(vocab-1)+")")
		}
	}
	for _, id := range sp.StopTokenIDs {
		if id < 0 || id >= vocab {
			return invalid("stop_token_ids", "stop token id "+strconv.Itoa(id)+" is outside the vocabulary (0.."+strconv.Itoa(vocab-1)+")")
		}
	}
	ext := req.VLLM
	if ext == nil {
		ext = &noExtensions
	}
	if ext.AllowedTokenIDs != nil && len(ext.AllowedTokenIDs) == 0 {
		return invalid("allowed_token_ids", "allowed_token_ids is empty: give at least one token id, or leave it out")
	}
	for _, id := range ext.AllowedTokenIDs {
		if id < 0 || id >= vocab {
			return invalid("allowed_token_ids", "allowed token id "+strconv.Itoa(id)+" is outside the vocabulary (0.."+strconv.Itoa(vocab-1)+")")
		}
	}
	*p = Prepared{}
	if len(ext.BadWords) > 0 {
		bw, err := badWords(m, ext.BadWords)
		if err != nil {
			return err
		}
		p.BadWords = bw
	}
	thinkingOff := false
	var err error
	switch {
	case len(req.Messages) > 0:
		tmpl := m.Template(len(req.Tools) > 0 && req.ToolChoice.Mode != engine.ToolChoiceNone)
		s, off, rerr := tmpl.RenderRequest(req)
		if rerr != nil {
			return rerr
		}
		thinkingOff = off
		// The template writes the BOS token itself when the model wants
		// one; add_special_tokens true adds it all the same (vLLM).
		add := m.AddBOS()
		switch req.SpecialTokens {
		case engine.SpecialTokensDefault:
			bos := m.BOSText()
			add = add && (bos == "" || !strings.HasPrefix(s, bos))
		case engine.SpecialTokensNone:
			add = false
		}
		p.Prompt, err = m.Tokenize(nil, s, add)
	case req.Prompt != "":
		p.Prompt, err = m.Tokenize(nil, req.Prompt, req.SpecialTokens != engine.SpecialTokensNone)
	case len(req.PromptTokens) > 0:
		for i, id := range req.PromptTokens {
			if id < 0 || int(id) >= vocab {
				return invalid("prompt", "prompt token "+strconv.Itoa(i)+" is "+strconv.Itoa(int(id))+
					", outside the vocabulary (0.."+strconv.Itoa(vocab-1)+")")
			}
		}
		// The engine reads the caller's ids and never writes them.
		p.Prompt = req.PromptTokens
	default:
		return invalid("prompt", "the prompt is empty")
	}
	if err != nil {
		return tokenizeError(err)
	}
	if len(p.Prompt) == 0 {
		return invalid("prompt", "the prompt is empty")
	}
	if len(req.PromptTokens) == 0 {
		req.PromptTokens = p.Prompt
	}
	mt, cerr := engine.CheckContext(len(p.Prompt), m.MaxLen(), sp.MaxTokens)
	if cerr != nil {
		return cerr
	}
	if cerr := engine.CheckMinTokens(sp.MinTokens, mt); cerr != nil {
		return cerr
	}
	if sp.MaxTokens == 0 && sp.Unset&engine.FieldMaxTokens != 0 && lim.DefaultMaxTokens > 0 && lim.DefaultMaxTokens < mt {
		mt = lim.DefaultMaxTokens // as vLLM's get_max_tokens
	}
	p.MaxTokens = mt
	fg, named, forced, ferr := grammar.ForToolChoice(req)
	if ferr != nil {
		return ferr
	}
	switch req.ResponseFormat.Type {
	case engine.FormatJSONObject:
		p.Format, p.Grammar = FormatJSONObject, grammar.JSONObject
	case engine.FormatJSONSchema:
		g, gerr := grammar.FromJSONSchema(req.ResponseFormat.Schema)
		if gerr != nil {
			return invalid("response_format", "the JSON schema cannot be enforced: "+gerr.Error())
		}
		p.Format, p.Grammar, p.Schema = FormatJSONSchema, g, req.ResponseFormat.Schema
	case engine.FormatRegex:
		if ext.Pattern == "" {
			return invalid("structured_outputs.regex", "structured_outputs.regex is empty")
		}
		g, gerr := grammar.FromRegex(ext.Pattern)
		if gerr != nil {
			return invalid("structured_outputs.regex", "the regex cannot be enforced: "+gerr.Error())
		}
		p.Format, p.Grammar = FormatGrammar, g
	case engine.FormatChoice:
		if len(ext.Choices) == 0 {
			return invalid("structured_outputs.choice", "structured_outputs.choice lists no choice")
		}
		p.Format, p.Grammar = FormatGrammar, grammar.FromChoices(ext.Choices)
	case engine.FormatGrammar:
		if !rootRule.MatchString(ext.Pattern) {
			return invalid("structured_outputs.grammar", "the grammar has no root rule: give it in GBNF (llama.cpp's) or xgrammar's EBNF, starting from \"root ::= ...\"")
		}
		p.Format, p.Grammar = FormatGrammar, ext.Pattern
	}
	if forced {
		// A forced call's grammar wins over response_format.
		p.Format, p.Grammar, p.Schema = FormatToolCall, fg, nil
		p.Forced, p.ForcedName = true, named
	}
	if p.Grammar != "" {
		if gerr := m.CheckGrammar(p.Grammar); gerr != nil {
			param := "response_format"
			if p.Format == FormatGrammar {
				param = "structured_outputs"
			}
			return invalid(param, gerr.Error())
		}
	}
	p.Parse = text.Options{
		Stop:         sp.Stop,
		IncludeStop:  sp.IncludeStopStr,
		MinTokens:    sp.MinTokens,
		Reasoning:    lim.ReasoningParser,
		ReasoningOff: thinkingOff,
		Tools:        lim.ToolCallParser,
		ToolsOff:     len(req.Tools) == 0 || req.ToolChoice.Mode == engine.ToolChoiceNone,
		Stream:       req.Stream, // tool-call arguments stream as they come
	}
	if len(req.Messages) == 0 {
		// Completions: the prompt is raw text, the output is too.
		p.Parse.Reasoning, p.Parse.Tools = "", ""
	}
	return nil
}

// noExtensions stands for a request's nil VLLM.
var noExtensions engine.VLLMExtensions

// rootRule finds a grammar's start rule.
var rootRule = regexp.MustCompile(`(?m)^[ \t]*root[ \t]*::=`)

// badWords tokenizes words as vLLM's front end does.
func badWords(m Model, words []string) ([][]int32, error) {
	var out [][]int32
	for _, w := range words {
		w = strings.TrimLeftFunc(w, unicode.IsSpace)
		alone, err := m.Tokenize(nil, w, false)
		if err != nil {
			return nil, tokenizeError(err)
		}
		if len(alone) == 0 {
			return nil, invalid("bad_words", "bad_words entries must tokenize to at least one token, "+strconv.Quote(w)+" does not")
		}
		out = append(out, alone)
		spaced, err := m.Tokenize(nil, " "+w, false)
		if err != nil {
			return nil, tokenizeError(err)
		}
		// After a space: kept when it is a word token of its own (another
		// first token, and as many tokens).
		if len(spaced) > 0 && spaced[0] != alone[0] && len(spaced) == len(alone) {
			out = append(out, spaced)
		}
		if len(out) > MaxBadWords {
			return nil, invalid("bad_words", "too many bad words after tokenization: "+strconv.Itoa(len(out))+", at most "+strconv.Itoa(MaxBadWords))
		}
	}
	return out, nil
}

// tokenizeError is a tokenizer's failure as the request's error.
func tokenizeError(err error) error {
	var ee *engine.Error
	if errors.As(err, &ee) {
		return ee
	}
	return &engine.Error{Kind: engine.KindInternal, Message: "tokenization failed: " + err.Error()}
}

func invalid(param, msg string) error {
	return &engine.Error{Kind: engine.KindInvalid, Param: param, Message: msg}
}
