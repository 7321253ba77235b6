package chattemplate

import (
	"encoding/json"

	"github.com/vajra-go/vajra/engine"
)

// RenderRequest renders the conversation of a chat request as every engine
// does before tokenizing it: req.Messages with req.Tools (none under
// tool_choice none), the generation prompt, and req.ChatTemplateKwargs as
// extra variables. thinkingOff reports chat_template_kwargs
// enable_thinking false (vLLM: the template then closes the think block
// itself and the output is all answer, unparsed for reasoning). Failures
// are the client's: a KindInvalid engine error naming the parameter.
//
// Safe for concurrent use.
func (t *Template) RenderRequest(req *engine.Request) (prompt string, thinkingOff bool, err *engine.Error) {
	tools := req.Tools
	if req.ToolChoice.Mode == engine.ToolChoiceNone {
		tools = nil
	}
	var ro RenderOptions
	ro.AddGenerationPrompt = true
	if len(req.ChatTemplateKwargs) > 0 {
		if jerr := json.Unmarshal(req.ChatTemplateKwargs, &ro.Extra); jerr != nil {
			return "", false, &engine.Error{Kind: engine.KindInvalid, Param: "chat_template_kwargs",
				Message: "chat_template_kwargs must be a JSON object: " + jerr.Error()}
		}
		if v, ok := ro.Extra["enable_thinking"].(bool); ok && !v {
			thinkingOff = true
		}
	}
	s, rerr := t.Render(req.Messages, tools, ro)
	if rerr != nil {
		return "", false, &engine.Error{Kind: engine.KindInvalid, Param: "messages",
			Message: "the model's chat template refused the conversation: " + rerr.Error()}
	}
	return s, thinkingOff, nil
}
