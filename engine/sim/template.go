package sim

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// RenderChatML renders a conversation as the prompt the simulated model
// reads, in the ChatML layout of Qwen2.5-style templates:
//
//	<|im_start|>system\n{system text}{tools block}<|im_end|>\n
//	<|im_start|>user\n{text}<|im_end|>\n
//	<|im_start|>assistant\n{text}\n<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call><|im_end|>\n
//	<|im_start|>user\n<tool_response>\n{result}\n</tool_response><|im_end|>\n
//	<|im_start|>assistant\n
//
// developer messages render as system. Tools are listed in the first system
// message (one is made when there is none). Consecutive tool results share
// one user turn. Prior reasoning of assistant turns is dropped, as Qwen3 does.
// The special markers are plain text to o200k_base, so they count as the
// several tokens they tokenize to. Safe for concurrent use.
func RenderChatML(msgs []engine.Message, tools []engine.Tool) string {
	b := appendChatML(make([]byte, 0, chatMLSize(msgs)), msgs, tools, promptGen)
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is never written again
}

// RenderChatMLRequest is RenderChatML for a request's messages, tools and
// generation-prompt switches (engine.Request.NoGenerationPrompt and
// ContinueFinalMessage), as Prepare renders them. Safe for concurrent use.
func RenderChatMLRequest(req *engine.Request) string {
	b := appendChatML(make([]byte, 0, chatMLSize(req.Messages)), req.Messages, req.Tools, promptEnd(req))
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is never written again
}

// promptEnding says how a rendered conversation ends.
type promptEnding uint8

const (
	promptGen      promptEnding = iota // an assistant header follows (add_generation_prompt)
	promptClosed                       // the last turn is closed, nothing follows
	promptContinue                     // the final assistant turn stays open (continue_final_message)
)

func promptEnd(req *engine.Request) promptEnding {
	switch {
	case req.ContinueFinalMessage:
		return promptContinue
	case req.NoGenerationPrompt:
		return promptClosed
	}
	return promptGen
}

// chatMLSize is a guess at the rendered size of msgs, for a first buffer.
func chatMLSize(msgs []engine.Message) int {
	n := 256
	for i := range msgs {
		n += len(msgs[i].Content) + 32
	}
	return n
}

// appendChatML appends the prompt RenderChatML renders to dst and returns
// it. Safe for concurrent use.
//
// end says how it ends; with promptContinue the final message, an
// assistant turn, is written up to its content and left open (its tool
// calls and end-of-turn are not written), which is where transformers'
// continue_final_message cuts this layout.
func appendChatML(dst []byte, msgs []engine.Message, tools []engine.Tool, end promptEnding) []byte {
	first := 0
	sys := len(msgs) > 0 && isSystem(msgs[0].Role)
	if sys || len(tools) > 0 {
		dst = append(dst, "<|im_start|>system\n"...)
		if sys {
			dst = append(dst, msgs[0].Content...)
			first = 1
		}
		dst = appendTools(dst, tools, sys)
		dst = append(dst, "<|im_end|>\n"...)
	}
	for i := first; i < len(msgs); i++ {
		m := &msgs[i]
		switch {
		case isSystem(m.Role):
			dst = append(dst, "<|im_start|>system\n"...)
			dst = append(dst, m.Content...)
			dst = append(dst, "<|im_end|>\n"...)
		case m.Role == "tool":
			if i == first || msgs[i-1].Role != "tool" {
				dst = append(dst, "<|im_start|>user"...)
			}
			dst = append(dst, "\n<tool_response>\n"...)
			dst = append(dst, m.Content...)
			dst = append(dst, "\n</tool_response>"...)
			if i+1 == len(msgs) || msgs[i+1].Role != "tool" {
				dst = append(dst, "<|im_end|>\n"...)
			}
		case m.Role == "assistant":
			dst = append(dst, "<|im_start|>assistant\n"...)
			dst = append(dst, m.Content...)
			if end == promptContinue && i == len(msgs)-1 {
				return dst
			}
			for j, tc := range m.ToolCalls {
				if j > 0 || m.Content != "" {
					dst = append(dst, '\n')
				}
				dst = append(dst, "<tool_call>\n{\"name\": "...)
				dst = codegen.AppendJSONStringS(dst, tc.Name)
				dst = append(dst, ", \"arguments\": "...)
				args := tc.Arguments
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				dst = append(dst, args...)
				dst = append(dst, "}\n</tool_call>"...)
			}
			dst = append(dst, "<|im_end|>\n"...)
		default:
			dst = append(dst, "<|im_start|>"...)
			dst = append(dst, m.Role...)
			dst = append(dst, '\n')
			dst = append(dst, m.Content...)
			dst = append(dst, "<|im_end|>\n"...)
		}
	}
	if end != promptGen {
		return dst
	}
	return append(dst, "<|im_start|>assistant\n"...)
}

func isSystem(role string) bool { return role == "system" || role == "developer" }

// appendTools appends the tool list of the system turn.
func appendTools(dst []byte, tools []engine.Tool, afterText bool) []byte {
	if len(tools) == 0 {
		return dst
	}
	if afterText {
		dst = append(dst, "\n\n"...)
	}
	dst = append(dst, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"+
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>"...)
	for _, t := range tools {
		dst = append(dst, "\n{\"type\": \"function\", \"function\": {\"name\": "...)
		dst = codegen.AppendJSONStringS(dst, t.Name)
		if t.Description != "" {
			dst = append(dst, ", \"description\": "...)
			dst = codegen.AppendJSONStringS(dst, t.Description)
		}
		if len(t.Parameters) > 0 {
			dst = append(dst, ", \"parameters\": "...)
			dst = append(dst, t.Parameters...)
		}
		dst = append(dst, "}}"...)
	}
	return append(dst, "\n</tools>\n\nFor each function call, return a json object with function name and arguments "+
		"within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"...)
}

// renderPool holds Prepare's render buffers: a rendered prompt is only
// tokenized, and the tokenizer keeps no reference to its input.
var renderPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledRender bounds the render buffers put back in renderPool (64 KiB):
// a longer conversation's buffer goes to the collector.
const maxPooledRender = 64 << 10

// encodeChatML renders msgs and tools into a pooled buffer and returns the
// prompt's token ids.
func (v *vocab) encodeChatML(msgs []engine.Message, tools []engine.Tool, end promptEnding) []int32 {
	bp := renderPool.Get().(*[]byte)
	b := appendChatML((*bp)[:0], msgs, tools, end)
	// The string lives only for the call: encode copies the ids out and
	// keeps nothing of the text (see encodeAppend).
	ids := v.encodePrompt(unsafe.String(unsafe.SliceData(b), len(b)), true)
	if cap(b) <= maxPooledRender {
		*bp = b[:0]
		renderPool.Put(bp)
	}
	return ids
}

// prepared is what Prepare computes for Start, kept in Request.Prepared.
type prepared struct {
	e         *Engine
	promptLen int
	// The prompt's block hashes are not kept: allocGroup computes them
	// from Request.PromptTokens at each admission (a few ns a token), so
	// that a held stream does not carry them.
	ctx        uint64 // content hash of the prompt, mixed with the engine seed
	maxTokens  int    // resolved: MaxTokens, or what is left of the context
	stops      bool   // the request has a non-empty stop string
	maxStop    int    // the longest stop string, bytes
	tool       *engine.Tool
	toolSchema *schema
	respSchema *schema
	echo       []int // echo mode: the tokens to repeat (nil in other modes)
	// promptSeen marks the candidate tokens the prompt holds, for the
	// repetition penalty (shape.go).
	promptSeen []bool
	// exact, when above 0, is the answer's length in tokens: the choice
	// ends (stop) after exactly that many, never earlier (a transcript,
	// see audio.go).
	exact int
	// spare is the session of the first Start of a one-choice request,
	// allocated with the prepared request; spareTaken claims it.
	spare      *group
	spareTaken atomic.Bool
	// shaped is set when the request has penalties or a logit bias (next
	// to spareTaken: a held stream keeps its prepared state, so no
	// padding).
	shaped bool
}

// preparedOne is a prepared request of one choice and the group its first
// Start takes, allocated together.
type preparedOne struct {
	p prepared
	g groupOne
}

// newPrepared returns the prepared state of a request of n choices: with
// one, its session's memory comes with it (see takeGroup).
func newPrepared(e *Engine, n int) *prepared {
	if n != 1 {
		return &prepared{e: e}
	}
	x := &preparedOne{p: prepared{e: e}}
	x.p.spare = x.g.init()
	return &x.p
}

// takeGroup returns a zero group of n choices: the spare one allocated with
// p the first time, a new one after (a request started again after Start
// failed). Safe for concurrent use.
func (p *prepared) takeGroup(n int) *group {
	if n == 1 && p.spare != nil && p.spareTaken.CompareAndSwap(false, true) {
		return p.spare
	}
	return makeGroup(n)
}

// Prepare renders and tokenizes req's prompt, validates its parameters and
// checks the context length; see engine.Engine. Safe for concurrent use.
func (e *Engine) Prepare(req *engine.Request) error {
	if err := e.validate(req); err != nil {
		return err
	}
	p := newPrepared(e, req.Sampling.Choices())
	var lastUser string
	switch {
	case len(req.Audio.PCM) > 0:
		if err := e.prepareAudio(req, p); err != nil {
			return err
		}
	case len(req.Messages) > 0:
		req.PromptTokens = e.vocab.encodeChatML(req.Messages, req.Tools, promptEnd(req))
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if req.Messages[i].Role == "user" {
				lastUser = req.Messages[i].Content
				break
			}
		}
		if e.cfg.Mode == ModeEcho {
			p.echo = e.vocab.encode(lastUser)
		}
	case req.Prompt != "":
		req.PromptTokens = e.vocab.encodePrompt(req.Prompt, false)
		lastUser = req.Prompt
		p.echo = e.echoScript(req.PromptTokens)
	case len(req.PromptTokens) > 0:
		for i, id := range req.PromptTokens {
			if !e.vocab.valid(int(id)) {
				return invalid("prompt", "prompt token "+strconv.Itoa(i)+" is "+strconv.Itoa(int(id))+
					", outside the vocabulary (0.."+strconv.Itoa(vocabSize-1)+")")
			}
		}
		p.echo = e.echoScript(req.PromptTokens)
	default:
		return invalid("prompt", "the prompt is empty")
	}
	p.promptLen = len(req.PromptTokens)
	limit := e.cfg.MaxModelLen
	mt := req.Sampling.MaxTokens
	switch {
	case mt > 0 && p.promptLen+mt > limit:
		return &engine.Error{Kind: engine.KindContextLength, Param: "max_tokens", Message: "This model's maximum context length is " +
			strconv.Itoa(limit) + " tokens. However, you requested " + strconv.Itoa(p.promptLen+mt) + " tokens (" +
			strconv.Itoa(p.promptLen) + " in the messages, " + strconv.Itoa(mt) +
			" in the completion). Please reduce the length of the messages or completion."}
	case mt == 0 && p.promptLen >= limit:
		return &engine.Error{Kind: engine.KindContextLength, Param: "messages", Message: "This model's maximum context length is " +
			strconv.Itoa(limit) + " tokens. However, your messages resulted in " + strconv.Itoa(p.promptLen) +
			" tokens, which leaves no room for the completion. Please reduce the length of the messages."}
	case mt == 0:
		mt = limit - p.promptLen
	}
	if cerr := engine.CheckMinTokens(req.Sampling.MinTokens, mt); cerr != nil {
		return cerr
	}
	if p.exact > 0 {
		mt = min(mt, p.exact)
	}
	p.maxTokens = mt
	h := uint64(e.cfg.Seed)
	for _, t := range req.PromptTokens {
		h = mix(h, uint64(t))
	}
	p.ctx = h
	for _, s := range req.Sampling.Stop {
		p.stops = p.stops || s != ""
		p.maxStop = max(p.maxStop, len(s))
	}
	if err := e.prepareFormat(req, p, lastUser); err != nil {
		return err
	}
	e.prepareShape(req, p)
	req.Prepared = p
	return nil
}

// echoScript returns the prompt ids as the script echo mode repeats (a
// seq's script is []int), or nil in any other mode, which repeats nothing.
func (e *Engine) echoScript(ids []int32) []int {
	if e.cfg.Mode != ModeEcho {
		return nil
	}
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// prepareFormat picks the tool to call, if any, and parses the schemas.
func (e *Engine) prepareFormat(req *engine.Request, p *prepared, lastUser string) error {
	tc := req.ToolChoice
	switch {
	case len(req.Tools) == 0 || tc.Mode == engine.ToolChoiceNone:
	case tc.Mode == engine.ToolChoiceNamed:
		for i := range req.Tools {
			if req.Tools[i].Name == tc.Name {
				p.tool = &req.Tools[i]
			}
		}
	case tc.Mode == engine.ToolChoiceRequired:
		p.tool = mentionedTool(req.Tools, lastUser)
		if p.tool == nil {
			p.tool = &req.Tools[p.ctx%uint64(len(req.Tools))]
		}
	default: // auto: only when the user names a tool
		p.tool = mentionedTool(req.Tools, lastUser)
	}
	var err error
	if p.tool != nil {
		if p.toolSchema, err = parseSchema(p.tool.Parameters); err != nil {
			return invalid("tools", "the parameters of tool "+strconv.Quote(p.tool.Name)+" are not a valid JSON Schema: "+err.Error())
		}
		if p.toolSchema.kind == kindAny {
			p.toolSchema.kind = kindObject
		}
		return nil
	}
	switch req.ResponseFormat.Type {
	case engine.FormatJSONObject:
		p.respSchema = jsonObjectSchema
	case engine.FormatJSONSchema:
		if p.respSchema, err = parseSchema(req.ResponseFormat.Schema); err != nil {
			return invalid("response_format", "response_format.json_schema.schema is not a valid JSON Schema: "+err.Error())
		}
	}
	return nil
}

// mentionedTool returns the first tool whose name the text mentions
// (case-insensitively), or nil.
func mentionedTool(tools []engine.Tool, text string) *engine.Tool {
	if text == "" {
		return nil
	}
	lower := strings.ToLower(text)
	for i := range tools {
		if name := tools[i].Name; name != "" && strings.Contains(lower, strings.ToLower(name)) {
			return &tools[i]
		}
	}
	return nil
}

// validate checks the parameters Prepare can refuse before the 200.
func (e *Engine) validate(req *engine.Request) error {
	if err := engine.CheckRequest(req, min(MaxN, e.cfg.MaxNumSeqs), MaxStopStrings); err != nil {
		return err
	}
	if err := engine.CheckCapabilities(req, e.Lacks(), "the simulator's models"); err != nil {
		return err
	}
	if err := engine.CheckRank(req, 1); err != nil {
		return err
	}
	return validateShape(&req.Sampling)
}

// Lacks declares what the simulator does not simulate (engine.Lacker):
// regex, choice and grammar constraints, vLLM's bad words, allowed token
// ids and priority scheduling.
func (e *Engine) Lacks() engine.Capability {
	return engine.CapGrammar | engine.CapBadWords | engine.CapAllowedTokenIDs | engine.CapPriority | engine.CapCacheSalt | engine.CapExtraArgs
}

var _ engine.Lacker = (*Engine)(nil)

func invalid(param, msg string) error {
	return &engine.Error{Kind: engine.KindInvalid, Param: param, Message: msg}
}

// ParsesOutput implements engine.OutputParser: the simulated model
// reasons and calls tools in output the engine splits itself, as a model
// behind a reasoning parser.
func (e *Engine) ParsesOutput() bool { return true }
