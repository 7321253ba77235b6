package anthropic

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/vajra-go/vajra/engine"
)

// Limits Anthropic documents for the Messages API, enforced here so a bad
// request fails before the 200 with the same words.
const (
	// maxToolNameLen is the longest tool name (^[a-zA-Z0-9_-]{1,128}$).
	maxToolNameLen = 128
	// minThinkingBudget is the smallest thinking.budget_tokens Anthropic accepts.
	minThinkingBudget = 1024
	// maxQuoted caps how much of a client value an error message quotes.
	maxQuoted = 64
)

// ToEngine validates r and fills dst's prompt, tools and sampling fields
// (Model, Messages, Tools, ToolChoice, ParallelToolCalls, Reasoning,
// Sampling, Stream); it leaves ID, Formatter and Arrival to the caller. dst's
// slices are reused from length 0, so a pooled Request keeps its capacity.
// Every error is a 400 invalid_request_error whose message starts with the
// parameter at fault.
func (r *MessagesRequest) ToEngine(dst *engine.Request) *Error {
	return r.toEngine(dst, true)
}

func (r *MessagesRequest) toEngine(dst *engine.Request, needMaxTokens bool) *Error {
	if r.Model == "" {
		return invalid("model", "Field required")
	}
	s := engine.Sampling{Temperature: 1, MaxTokens: r.MaxTokens.V}
	if needMaxTokens {
		if !r.MaxTokens.Defined {
			return invalid("max_tokens", "Field required")
		}
		if r.MaxTokens.V < 1 {
			return invalid("max_tokens", "must be greater than or equal to 1, got "+strconv.Itoa(r.MaxTokens.V))
		}
	}
	if r.Temperature.Defined {
		if t := r.Temperature.V; t < 0 || t > 1 {
			return invalid("temperature", "must be between 0 and 1, got "+strconv.FormatFloat(t, 'g', -1, 64))
		}
		s.Temperature = r.Temperature.V
	}
	if r.TopP.Defined {
		if p := r.TopP.V; p < 0 || p > 1 {
			return invalid("top_p", "must be between 0 and 1, got "+strconv.FormatFloat(p, 'g', -1, 64))
		}
		s.TopP = r.TopP.V
	}
	if r.TopK.Defined {
		if r.TopK.V < 0 {
			return invalid("top_k", "must be greater than or equal to 0, got "+strconv.Itoa(r.TopK.V))
		}
		s.TopK = r.TopK.V
	}
	// What was left out takes the model's generation defaults, as in
	// vLLM's Messages endpoint (a chat request with the others unset);
	// max_tokens is always given.
	s.Unset = engine.AllSamplingFields &^ engine.FieldMaxTokens
	if r.Temperature.Defined {
		s.Unset &^= engine.FieldTemperature
	}
	if r.TopP.Defined {
		s.Unset &^= engine.FieldTopP
	}
	if r.TopK.Defined {
		s.Unset &^= engine.FieldTopK
	}
	for i, stop := range r.StopSequences {
		if stop == "" {
			return invalid("stop_sequences."+strconv.Itoa(i), "must not be empty")
		}
	}
	s.Stop = r.StopSequences

	var reasoning engine.Reasoning
	if t := r.Thinking; t != nil {
		switch t.Type {
		case "enabled":
			if t.BudgetTokens < minThinkingBudget {
				return invalid("thinking.budget_tokens", "must be greater than or equal to 1024, got "+strconv.Itoa(t.BudgetTokens))
			}
			if needMaxTokens && t.BudgetTokens >= r.MaxTokens.V {
				return invalid("thinking.budget_tokens", "must be less than max_tokens ("+strconv.Itoa(r.MaxTokens.V)+"), got "+strconv.Itoa(t.BudgetTokens))
			}
			reasoning = engine.Reasoning{Enabled: true, BudgetTokens: t.BudgetTokens}
		case "adaptive":
			reasoning = engine.Reasoning{Enabled: true}
		case "disabled":
		default:
			return invalid("thinking.type", `must be "enabled", "disabled" or "adaptive", got `+quote(t.Type))
		}
	}

	tools, err := r.mapTools(dst.Tools[:0])
	if err != nil {
		return err
	}
	choice, parallel, err := r.mapToolChoice(tools)
	if err != nil {
		return err
	}
	format := engine.ResponseFormat{Type: engine.FormatText}
	if oc := r.OutputConfig; oc != nil {
		if format, err = oc.toEngine(choice); err != nil {
			return err
		}
		if oc.Effort != "" {
			reasoning.Effort = engineEffort[oc.Effort]
		}
	}

	msgs := dst.Messages[:0]
	if sys, err := joinText(&r.System, "system"); err != nil {
		return err
	} else if sys != "" {
		msgs = append(msgs, engine.Message{Role: "system", Content: sys})
	}
	if len(r.Messages) == 0 {
		return invalid("messages", "at least one message is required")
	}
	for i := range r.Messages {
		if msgs, err = appendMessage(msgs, &r.Messages[i], i); err != nil {
			return err
		}
	}

	dst.Model = r.Model
	dst.Messages = msgs
	dst.Tools = tools
	dst.ToolChoice = choice
	dst.ParallelToolCalls = parallel
	dst.Reasoning = reasoning
	dst.ResponseFormat = format
	dst.Sampling = s
	dst.Stream = r.Stream
	return nil
}

// engineEffort maps output_config.effort to engine.Reasoning's effort,
// whose highest is "high".
var engineEffort = map[string]string{"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}

// toEngine checks output_config and returns the answer's format: a JSON
// Schema constrains the answer as OpenAI's json_schema response_format
// does (vLLM's Messages endpoint maps it so). A forced tool call already
// constrains the answer: the two together are refused, as in chat.
func (oc *OutputConfig) toEngine(choice engine.ToolChoice) (engine.ResponseFormat, *Error) {
	text := engine.ResponseFormat{Type: engine.FormatText}
	if _, ok := engineEffort[oc.Effort]; oc.Effort != "" && !ok {
		return text, invalid("output_config.effort", `must be "low", "medium", "high", "xhigh" or "max", got `+quote(oc.Effort))
	}
	f := oc.Format
	if f == nil {
		return text, nil
	}
	if f.Type != "" && f.Type != "json_schema" {
		return text, invalid("output_config.format.type", `must be "json_schema", got `+quote(f.Type))
	}
	if f.Schema == nil {
		return text, invalid("output_config.format.schema", "Field required")
	}
	if !f.Schema.IsObject() {
		return text, invalid("output_config.format.schema", "must be a JSON Schema object")
	}
	if choice.Mode == engine.ToolChoiceNamed || choice.Mode == engine.ToolChoiceRequired {
		return text, invalid("output_config.format", "cannot be combined with a tool_choice that forces a tool call")
	}
	return engine.ResponseFormat{Type: engine.FormatJSONSchema, Name: "json_schema", Schema: bytes.Clone(f.Schema)}, nil
}

func (r *MessagesRequest) mapTools(tools []engine.Tool) ([]engine.Tool, *Error) {
	for i := range r.Tools {
		t := &r.Tools[i]
		p := "tools." + strconv.Itoa(i)
		if err := checkToolName(t.Name, p+".name"); err != nil {
			return nil, err
		}
		for j := range tools {
			if tools[j].Name == t.Name {
				return nil, invalid(p+".name", "tool names must be unique, "+quote(t.Name)+" is repeated")
			}
		}
		et := engine.Tool{Name: t.Name, Description: t.Description}
		switch t.Type {
		case "", "custom":
			if len(t.InputSchema) == 0 {
				return nil, invalid(p+".input_schema", "Field required")
			}
			if !t.InputSchema.IsObject() {
				return nil, invalid(p+".input_schema", "must be a JSON object")
			}
			et.Parameters = t.InputSchema
		default:
			// An Anthropic-defined tool (bash_20250124, text_editor_…,
			// web_search_…): its schema is implicit and its extra fields are
			// skipped; the engine sees a tool with that name.
		}
		tools = append(tools, et)
	}
	return tools, nil
}

func (r *MessagesRequest) mapToolChoice(tools []engine.Tool) (engine.ToolChoice, bool, *Error) {
	tc := r.ToolChoice
	if tc == nil {
		return engine.ToolChoice{}, true, nil
	}
	parallel := !tc.DisableParallelToolUse
	switch tc.Type {
	case "auto":
		return engine.ToolChoice{Mode: engine.ToolChoiceAuto}, parallel, nil
	case "none":
		return engine.ToolChoice{Mode: engine.ToolChoiceNone}, parallel, nil
	case "any":
		if len(tools) == 0 {
			return engine.ToolChoice{}, false, invalid("tool_choice.type", `"any" requires tools`)
		}
		return engine.ToolChoice{Mode: engine.ToolChoiceRequired}, parallel, nil
	case "tool":
		if tc.Name == "" {
			return engine.ToolChoice{}, false, invalid("tool_choice.name", "Field required")
		}
		for i := range tools {
			if tools[i].Name == tc.Name {
				return engine.ToolChoice{Mode: engine.ToolChoiceNamed, Name: tc.Name}, parallel, nil
			}
		}
		return engine.ToolChoice{}, false, invalid("tool_choice.name", "no tool named "+quote(tc.Name)+" in tools")
	}
	return engine.ToolChoice{}, false, invalid("tool_choice.type", `must be "auto", "any", "tool" or "none", got `+quote(tc.Type))
}

// appendMessage maps messages[i] onto engine messages: an assistant turn
// becomes one assistant message (text, reasoning from thinking blocks,
// tool_use blocks as ToolCalls); a user turn becomes user messages for its
// text and one tool message per tool_result, in order.
func appendMessage(msgs []engine.Message, m *Message, i int) ([]engine.Message, *Error) {
	p := "messages." + strconv.Itoa(i)
	switch m.Role {
	case "user", "assistant":
	case "":
		return nil, invalid(p+".role", "Field required")
	default:
		return nil, invalid(p+".role", `must be "user" or "assistant", got `+quote(m.Role))
	}
	if m.Content.IsString {
		return append(msgs, engine.Message{Role: m.Role, Content: m.Content.Text}), nil
	}
	if m.Content.Blocks == nil {
		return nil, invalid(p+".content", "Field required")
	}
	out := engine.Message{Role: m.Role}
	results := 0
	var text, thinking strings.Builder
	for j := range m.Content.Blocks {
		b := &m.Content.Blocks[j]
		bp := p + ".content." + strconv.Itoa(j)
		switch b.Type {
		case "text":
			if text.Len() > 0 {
				text.WriteByte('\n')
			}
			text.WriteString(b.Text)
		case "thinking", "redacted_thinking":
			if m.Role != "assistant" {
				return nil, invalid(bp, b.Type+" blocks are only allowed in assistant messages")
			}
			// redacted_thinking is opaque: nothing the engine can render.
			thinking.WriteString(b.Thinking)
		case "tool_use":
			if m.Role != "assistant" {
				return nil, invalid(bp, "tool_use blocks are only allowed in assistant messages")
			}
			if b.ID == "" {
				return nil, invalid(bp+".id", "Field required")
			}
			if b.Name == "" {
				return nil, invalid(bp+".name", "Field required")
			}
			args := "{}"
			if len(b.Input) > 0 {
				if !b.Input.IsObject() {
					return nil, invalid(bp+".input", "must be a JSON object")
				}
				args = string(b.Input)
			}
			out.ToolCalls = append(out.ToolCalls, engine.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		case "tool_result":
			if m.Role != "user" {
				return nil, invalid(bp, "tool_result blocks are only allowed in user messages")
			}
			if b.ToolUseID == "" {
				return nil, invalid(bp+".tool_use_id", "Field required")
			}
			result, err := joinText(&b.Content, bp+".content")
			if err != nil {
				return nil, err
			}
			// Text before a tool result stays before it.
			if text.Len() > 0 {
				msgs = append(msgs, engine.Message{Role: "user", Content: text.String()})
				text.Reset()
			}
			msgs = append(msgs, engine.Message{Role: "tool", ToolCallID: b.ToolUseID, Content: result})
			results++
		case "":
			return nil, invalid(bp+".type", "Field required")
		default:
			return nil, unsupportedBlock(bp, b.Type)
		}
	}
	out.Content = text.String()
	out.Reasoning = thinking.String()
	if results > 0 && out.Content == "" {
		return msgs, nil // a turn of tool results only
	}
	return append(msgs, out), nil
}

// joinText flattens a string-or-text-blocks field (system, tool_result
// content) into one string, refusing non-text blocks under param p.
func joinText(c *Content, p string) (string, *Error) {
	if c.IsString || len(c.Blocks) == 0 {
		return c.Text, nil
	}
	var sb strings.Builder
	for j := range c.Blocks {
		b := &c.Blocks[j]
		switch b.Type {
		case "text":
			if sb.Len() > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(b.Text)
		case "":
			return "", invalid(p+"."+strconv.Itoa(j)+".type", "Field required")
		default:
			return "", unsupportedBlock(p+"."+strconv.Itoa(j), b.Type)
		}
	}
	return sb.String(), nil
}

// knownBlocks are content block types Anthropic defines that Vajra cannot
// render (no vision, documents, or server-side tools).
var knownBlocks = map[string]bool{
	"image": true, "document": true, "search_result": true, "container_upload": true,
	"server_tool_use": true, "web_search_tool_result": true, "web_fetch_tool_result": true,
	"code_execution_tool_result": true, "bash_code_execution_tool_result": true,
	"text_editor_code_execution_tool_result": true, "tool_search_tool_result": true,
	"mcp_tool_use": true, "mcp_tool_result": true,
}

func unsupportedBlock(p, typ string) *Error {
	if knownBlocks[typ] {
		return invalid(p, typ+" content is not supported")
	}
	return invalid(p+".type", "unknown content block type "+quote(typ))
}

func checkToolName(name, p string) *Error {
	if name == "" {
		return invalid(p, "Field required")
	}
	if len(name) > maxToolNameLen {
		return invalid(p, "must be at most 128 characters")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return invalid(p, "must match ^[a-zA-Z0-9_-]{1,128}$, got "+quote(name))
		}
	}
	return nil
}

// quote renders a client value for an error message: Go-quoted (so nothing
// is echoed unescaped) and cut to maxQuoted bytes.
func quote(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "…"
	}
	return strconv.Quote(s)
}
