package openai

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/mailru/easyjson/opt"

	"github.com/vajra-go/vajra/engine"
)

// Limits on Responses requests; OpenAI's own unless noted.
const (
	// MaxResponsesMetadata bounds "metadata" pairs; keys are at most 64
	// bytes and values at most 512.
	MaxResponsesMetadata   = 16
	maxMetadataKeyLen      = 64
	maxMetadataValueLen    = 512
	maxResponsesInputItems = 4096 // our bound: each item costs a message
)

// ToEngine validates r and fills dst (which the caller has reset; ID,
// Formatter, StreamInterval and Arrival are the caller's). history is the
// conversation rebuilt by the caller from previous_response_id (that
// response's input and output items, oldest first) and goes between the
// instructions and r's input. r's instructions become the first, system
// message; a previous response's instructions are not carried over, as
// OpenAI documents. It returns the first problem found, naming the
// parameter, or nil.
func (r *ResponsesRequest) ToEngine(dst *engine.Request, history []engine.Message) *ParamError {
	if r.Background && !r.StoreEnabled() {
		// Background responses live in the store: they are polled there.
		return &ParamError{Param: "background", Code: CodeInvalidValue,
			Message: "background can only be used when 'store' is true."}
	}
	if r.Prompt.Set {
		return unsupported("prompt", "it keeps no reusable prompts; send instructions and input")
	}
	if r.Conversation.Set {
		return unsupported("conversation", "it keeps no conversations; chain responses with previous_response_id")
	}
	if r.IncludeReasoning.Defined && !r.IncludeReasoning.V {
		return &ParamError{Param: "include_reasoning", Code: CodeUnsupported,
			Message: "'include_reasoning': false is not supported on this endpoint: the response holds the reasoning items the model generates (/v1/chat/completions takes it)."}
	}
	dst.Model = r.Model
	// A background response always runs as a stream: its events are
	// logged for GET ...?stream=true and its output is read from them
	// (the caller sets Stream; r.Stream says whether the POST streams).
	dst.Stream = r.Stream || r.Background
	if err := r.validateSampling(&dst.Sampling); err != nil {
		return err
	}
	if err := r.validateMetadata(); err != nil {
		return err
	}
	if r.MaxToolCalls.Defined && r.MaxToolCalls.V < 0 {
		return rangeError("max_tool_calls", "at least 0", strconv.Itoa(r.MaxToolCalls.V))
	}
	switch r.Truncation {
	case "", "auto", "disabled":
	default:
		return &ParamError{Param: "truncation", Code: CodeInvalidValue,
			Message: "'truncation' must be \"auto\" or \"disabled\" (got " + quoteValue(r.Truncation) + ")."}
	}
	if err := r.toEngineTools(dst); err != nil {
		return err
	}
	if err := r.toEngineReasoning(dst); err != nil {
		return err
	}
	if err := r.toEngineFormat(dst); err != nil {
		return err
	}
	if err := r.toEngineVLLM(dst); err != nil {
		return err
	}
	return r.toEngineInput(dst, history)
}

// toEngineVLLM applies vLLM's priority, structured_outputs and
// chat_template_kwargs, after text.format: vLLM refuses both constraints
// at once, and a constraint with a named tool_choice, as in chat.
func (r *ResponsesRequest) toEngineVLLM(dst *engine.Request) *ParamError {
	if r.StructuredOutputs != nil && r.Text != nil && r.Text.Format.Type != "" {
		return &ParamError{Param: "structured_outputs", Code: CodeInvalidValue,
			Message: "Cannot specify both structured_outputs and text.format"}
	}
	v := vllmSampling{priority: r.Priority, structured: r.StructuredOutputs, cacheSalt: r.CacheSalt, sessionID: r.SessionID, xargs: r.VLLMXArgs}
	if err := v.toEngine(dst); err != nil {
		return err
	}
	if r.StructuredOutputs != nil && dst.ResponseFormat.Type != engine.FormatText && dst.ToolChoice.Mode == engine.ToolChoiceNamed {
		return &ParamError{Param: "structured_outputs", Code: CodeInvalidValue,
			Message: "You can only either use constraints for structured outputs or tools, not both."}
	}
	if len(r.ChatTemplateKwargs) > 0 {
		if !r.ChatTemplateKwargs.IsObject() {
			return &ParamError{Param: "chat_template_kwargs", Code: CodeInvalidType,
				Message: "'chat_template_kwargs' must be an object."}
		}
		dst.ChatTemplateKwargs = bytes.Clone(r.ChatTemplateKwargs)
	}
	return nil
}

func (r *ResponsesRequest) validateSampling(s *engine.Sampling) *ParamError {
	*s = engine.Sampling{Temperature: 1}
	if r.Temperature.Defined {
		if t := r.Temperature.V; t < 0 || t > 2 {
			return rangeError("temperature", "between 0 and 2", fmtFloat(t))
		}
		s.Temperature = r.Temperature.V
	}
	if r.TopP.Defined {
		if p := r.TopP.V; p < 0 || p > 1 {
			return rangeError("top_p", "between 0 and 1", fmtFloat(p))
		}
		s.TopP = r.TopP.V
	}
	if r.MaxOutputTokens.Defined {
		if r.MaxOutputTokens.V < 1 {
			return rangeError("max_output_tokens", "at least 1", strconv.Itoa(r.MaxOutputTokens.V))
		}
		s.MaxTokens = r.MaxOutputTokens.V
	}
	if r.TopLogprobs.Defined {
		if n := r.TopLogprobs.V; n < 0 || n > engine.MaxTopLogprobs {
			return rangeError("top_logprobs", "an integer from 0 to 20", strconv.Itoa(n))
		}
		s.Logprobs, s.TopLogprobs = true, r.TopLogprobs.V
	}
	if r.WantsLogprobs() {
		s.Logprobs = true
	}
	// vLLM's extensions, checked as chat checks them.
	if err := samplingRanges(s, opt.Float64{}, opt.Float64{}, r.TopK); err != nil {
		return err
	}
	pp := penaltyParams{r.FrequencyPenalty, r.PresencePenalty, r.RepetitionPenalty, r.MinP, &r.LogitBias}
	if err := toEnginePenalties(s, pp); err != nil {
		return err
	}
	s.Unset = unset(r.Temperature, r.TopP, r.TopK, pp, r.MaxOutputTokens.Defined)
	if r.Seed.Defined {
		s.Seed, s.HasSeed = r.Seed.V, true
	}
	s.IgnoreEOS, s.IncludeStopStr = r.IgnoreEOS, r.IncludeStopStrInOutput
	detokenizeOptions(s, r.SkipSpecialTokens, opt.Bool{})
	return validateStop(r.Stop, r.StopTokenIDs, s)
}

// IncludeLogprobs is the "include" value asking for output text logprobs.
const IncludeLogprobs = "message.output_text.logprobs"

// WantsLogprobs reports whether output_text parts carry logprobs: with
// top_logprobs, or include "message.output_text.logprobs".
func (r *ResponsesRequest) WantsLogprobs() bool {
	if r.TopLogprobs.Defined {
		return true
	}
	for _, v := range r.Include {
		if v == IncludeLogprobs {
			return true
		}
	}
	return false
}

func (r *ResponsesRequest) validateMetadata() *ParamError {
	m := &r.Metadata
	if m.Bad {
		return &ParamError{Param: "metadata", Code: CodeInvalidType, Message: "'metadata' values must be strings."}
	}
	if len(m.Pairs) > MaxResponsesMetadata {
		return rangeError("metadata", "at most 16 pairs", strconv.Itoa(len(m.Pairs))+" pairs")
	}
	for _, p := range m.Pairs {
		if len(p.Key) > maxMetadataKeyLen {
			return &ParamError{Param: "metadata", Code: CodeInvalidValue, Message: "'metadata' keys must be at most 64 characters."}
		}
		if len(p.Value) > maxMetadataValueLen {
			return &ParamError{Param: "metadata." + quoteValue(p.Key), Code: CodeInvalidValue, Message: "'metadata' values must be at most 512 characters."}
		}
	}
	return nil
}

func (r *ResponsesRequest) toEngineTools(dst *engine.Request) *ParamError {
	if len(r.Tools) > MaxTools {
		return rangeError("tools", "at most "+strconv.Itoa(MaxTools)+" tools", strconv.Itoa(len(r.Tools))+" tools")
	}
	tools := dst.Tools[:0]
	for i := range r.Tools {
		t := &r.Tools[i]
		p := "tools[" + strconv.Itoa(i) + "]"
		if t.Type != "function" {
			if t.Type == "" {
				return &ParamError{Param: p + ".type", Code: CodeMissing, Message: "Each tool needs a 'type'."}
			}
			return &ParamError{Param: p + ".type", Code: CodeUnsupportedValue,
				Message: "Tools of type " + quoteValue(t.Type) + " are not supported: only \"function\" tools are."}
		}
		if err := checkToolName(p+".name", t.Name); err != nil {
			return err
		}
		for j := range i {
			if r.Tools[j].Name == t.Name {
				return &ParamError{Param: p + ".name", Code: CodeInvalidValue,
					Message: "Duplicate function name " + quoteValue(t.Name) + " in 'tools'."}
			}
		}
		if t.Parameters != nil && !t.Parameters.IsObject() {
			return &ParamError{Param: p + ".parameters", Code: CodeInvalidType,
				Message: "A function's 'parameters' must be a JSON Schema object."}
		}
		tools = append(tools, engine.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	dst.Tools = tools
	dst.ParallelToolCalls = r.ParallelToolCalls.Get(true)

	tc := &r.ToolChoice
	switch tc.Mode {
	case "", "auto":
		dst.ToolChoice = engine.ToolChoice{Mode: engine.ToolChoiceAuto}
	case "none":
		dst.ToolChoice = engine.ToolChoice{Mode: engine.ToolChoiceNone}
	case "required":
		if len(r.Tools) == 0 {
			return &ParamError{Param: "tool_choice", Code: CodeInvalidValue,
				Message: "'tool_choice' \"required\" needs 'tools' to be specified."}
		}
		dst.ToolChoice = engine.ToolChoice{Mode: engine.ToolChoiceRequired}
	case "function":
		if tc.Name == "" {
			return &ParamError{Param: "tool_choice.name", Code: CodeMissing, Message: "'tool_choice.name' is required."}
		}
		found := false
		for i := range r.Tools {
			found = found || r.Tools[i].Name == tc.Name
		}
		if !found {
			return &ParamError{Param: "tool_choice.name", Code: CodeUnknownTool,
				Message: "'tool_choice' names function " + quoteValue(tc.Name) + ", which is not in 'tools'."}
		}
		dst.ToolChoice = engine.ToolChoice{Mode: engine.ToolChoiceNamed, Name: tc.Name}
	default:
		return &ParamError{Param: "tool_choice", Code: CodeUnsupportedValue,
			Message: "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\":\"function\",\"name\":...} (got " + quoteValue(tc.Mode) + ")."}
	}
	return nil
}

func (r *ResponsesRequest) toEngineReasoning(dst *engine.Request) *ParamError {
	dst.Reasoning = engine.Reasoning{}
	rs := r.Reasoning
	if rs == nil {
		return nil
	}
	switch rs.Summary {
	case "", "auto", "concise", "detailed":
	default:
		return &ParamError{Param: "reasoning.summary", Code: CodeInvalidValue,
			Message: "'reasoning.summary' must be \"auto\", \"concise\" or \"detailed\" (got " + quoteValue(rs.Summary) + ")."}
	}
	switch rs.Effort {
	case "none":
	case "", "minimal", "low", "medium", "high":
		dst.Reasoning = engine.Reasoning{Enabled: true, Effort: rs.Effort}
	case "xhigh":
		dst.Reasoning = engine.Reasoning{Enabled: true, Effort: "high"}
	default:
		return &ParamError{Param: "reasoning.effort", Code: CodeInvalidValue,
			Message: "'reasoning.effort' must be one of \"none\", \"minimal\", \"low\", \"medium\", \"high\", \"xhigh\" (got " + quoteValue(rs.Effort) + ")."}
	}
	return nil
}

func (r *ResponsesRequest) toEngineFormat(dst *engine.Request) *ParamError {
	dst.ResponseFormat = engine.ResponseFormat{Type: engine.FormatText}
	if r.Text == nil {
		return nil
	}
	f := &r.Text.Format
	switch f.Type {
	case "", "text":
	case "json_object":
		dst.ResponseFormat = engine.ResponseFormat{Type: engine.FormatJSONObject}
	case "json_schema":
		if f.Name == "" {
			return &ParamError{Param: "text.format.name", Code: CodeMissing, Message: "'text.format.name' is required."}
		}
		if f.Schema == nil {
			return &ParamError{Param: "text.format.schema", Code: CodeMissing, Message: "'text.format.schema' is required."}
		}
		if !f.Schema.IsObject() {
			return &ParamError{Param: "text.format.schema", Code: CodeInvalidType,
				Message: "'text.format.schema' must be a JSON Schema object."}
		}
		dst.ResponseFormat = engine.ResponseFormat{Type: engine.FormatJSONSchema, Name: f.Name, Schema: f.Schema}
	default:
		return &ParamError{Param: "text.format.type", Code: CodeInvalidValue,
			Message: "'text.format.type' must be \"text\", \"json_object\" or \"json_schema\" (got " + quoteValue(f.Type) + ")."}
	}
	switch r.Text.Verbosity {
	case "", "low", "medium", "high":
	default:
		return &ParamError{Param: "text.verbosity", Code: CodeInvalidValue,
			Message: "'text.verbosity' must be \"low\", \"medium\" or \"high\" (got " + quoteValue(r.Text.Verbosity) + ")."}
	}
	return nil
}

// toEngineInput builds the conversation: instructions, history, input.
// Consecutive function_call items join the assistant message before them,
// so one assistant turn carries its text and all its calls.
func (r *ResponsesRequest) toEngineInput(dst *engine.Request, history []engine.Message) *ParamError {
	in := &r.Input
	if !in.IsString && len(in.Items) == 0 {
		return &ParamError{Param: "input", Code: CodeMissing, Message: "'input' must be a non-empty string or array of items."}
	}
	if len(in.Items) > maxResponsesInputItems {
		return rangeError("input", "at most "+strconv.Itoa(maxResponsesInputItems)+" items", strconv.Itoa(len(in.Items))+" items")
	}
	msgs := dst.Messages[:0]
	if r.Instructions != "" {
		msgs = append(msgs, engine.Message{Role: "system", Content: r.Instructions})
	}
	msgs = append(msgs, history...)
	if in.IsString {
		dst.Messages = append(msgs, engine.Message{Role: "user", Content: in.Text})
		return nil
	}
	fresh := len(msgs) // messages from here on are this request's own
	for i := range in.Items {
		it := &in.Items[i]
		p := "input[" + strconv.Itoa(i) + "]"
		switch it.Type {
		case "", "message":
			m, err := inputMessage(it, p)
			if err != nil {
				return err
			}
			msgs = append(msgs, m)
		case "function_call":
			if it.CallID == "" {
				return &ParamError{Param: p + ".call_id", Code: CodeMissing, Message: "A function_call item needs 'call_id'."}
			}
			if it.Name == "" {
				return &ParamError{Param: p + ".name", Code: CodeMissing, Message: "A function_call item needs 'name'."}
			}
			tc := engine.ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments}
			if n := len(msgs); n > fresh && msgs[n-1].Role == "assistant" {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, tc)
			} else {
				msgs = append(msgs, engine.Message{Role: "assistant", ToolCalls: []engine.ToolCall{tc}})
			}
		case "function_call_output":
			if it.CallID == "" {
				return &ParamError{Param: p + ".call_id", Code: CodeMissing, Message: "A function_call_output item needs 'call_id'."}
			}
			if err := checkTextParts(&it.Output, p+".output"); err != nil {
				return err
			}
			msgs = append(msgs, engine.Message{Role: "tool", ToolCallID: it.CallID, Content: flatten(&it.Output)})
		case "reasoning":
			// Prior reasoning is not replayed to the model.
		case "item_reference":
			return &ParamError{Param: p + ".type", Code: CodeUnsupportedValue,
				Message: "Item references are not supported: send the item itself, or use 'previous_response_id'."}
		default:
			return &ParamError{Param: p + ".type", Code: CodeUnsupportedValue,
				Message: "Input items of type " + quoteValue(it.Type) + " are not supported."}
		}
	}
	dst.Messages = msgs
	return nil
}

func inputMessage(it *ResponsesInputItem, p string) (engine.Message, *ParamError) {
	switch it.Role {
	case "user", "assistant", "system", "developer":
	case "":
		return engine.Message{}, &ParamError{Param: p + ".role", Code: CodeMissing, Message: "A message item needs a 'role'."}
	default:
		return engine.Message{}, &ParamError{Param: p + ".role", Code: CodeInvalidValue,
			Message: "'role' must be \"user\", \"assistant\", \"system\" or \"developer\" (got " + quoteValue(it.Role) + ")."}
	}
	if !it.Content.Set {
		return engine.Message{}, &ParamError{Param: p + ".content", Code: CodeMissing, Message: "A message item needs 'content'."}
	}
	if err := checkTextParts(&it.Content, p+".content"); err != nil {
		return engine.Message{}, err
	}
	return engine.Message{Role: it.Role, Content: flatten(&it.Content)}, nil
}

// checkTextParts refuses parts that are not text, naming the first.
func checkTextParts(c *ResponsesContent, p string) *ParamError {
	for j := range c.Parts {
		switch t := c.Parts[j].Type; t {
		case "input_text", "output_text", "text", "refusal":
		case "input_image", "input_file", "input_audio":
			return &ParamError{Param: p + "[" + strconv.Itoa(j) + "]", Code: CodeUnsupportedContent,
				Message: "Content parts of type " + quoteValue(t) + " are not supported: this model accepts text parts only."}
		case "":
			return &ParamError{Param: p + "[" + strconv.Itoa(j) + "].type", Code: CodeMissing, Message: "Each content part needs a 'type'."}
		default:
			return &ParamError{Param: p + "[" + strconv.Itoa(j) + "].type", Code: CodeInvalidValue,
				Message: "Unknown content part type " + quoteValue(t) + "."}
		}
	}
	return nil
}

// flatten joins a content's text parts with "\n" (as chat content does).
func flatten(c *ResponsesContent) string {
	if c.IsString || len(c.Parts) == 0 {
		return c.Text
	}
	if len(c.Parts) == 1 {
		return partText(&c.Parts[0])
	}
	var b strings.Builder
	for j := range c.Parts {
		if j > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(partText(&c.Parts[j]))
	}
	return b.String()
}

func partText(p *ResponsesContentPart) string {
	if p.Type == "refusal" {
		return p.Refusal
	}
	return p.Text
}

// HistoryMessages turns a stored response's input and output items back
// into the conversation, for the next request's previous_response_id:
// pass the stored input items, then the output items. Reasoning items are
// dropped, like instructions.
func HistoryMessages(dst []engine.Message, items []ResponseItem) []engine.Message {
	for i := range items {
		it := &items[i]
		switch it.Type {
		case "message":
			c := ResponsesContent{Parts: it.Content, Set: true}
			dst = append(dst, engine.Message{Role: it.Role, Content: flatten(&c)})
		case "function_call":
			tc := engine.ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments}
			if n := len(dst); n > 0 && dst[n-1].Role == "assistant" {
				dst[n-1].ToolCalls = append(dst[n-1].ToolCalls, tc)
			} else {
				dst = append(dst, engine.Message{Role: "assistant", ToolCalls: []engine.ToolCall{tc}})
			}
		case "function_call_output":
			dst = append(dst, engine.Message{Role: "tool", ToolCallID: it.CallID, Content: it.Output})
		}
	}
	return dst
}
