package chattemplate

import (
	"encoding/json"
	"strings"
	"unicode"

	"github.com/vajra-go/vajra/engine"
)

// RenderRequest renders the conversation of a chat request as every engine
// does before tokenizing it: req.Messages with req.Tools (none under
// tool_choice none), the generation prompt (unless req.NoGenerationPrompt),
// and req.ChatTemplateKwargs as extra variables. With
// req.ContinueFinalMessage the prompt is cut just after the final
// message's content (see ContinueFinal). thinkingOff reports chat_template_kwargs
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
	ro.AddGenerationPrompt = !req.NoGenerationPrompt && !req.ContinueFinalMessage
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
	if req.ContinueFinalMessage && len(req.Messages) > 0 {
		var ok bool
		if s, ok = ContinueFinal(s, req.Messages[len(req.Messages)-1].Content); !ok {
			return "", false, &engine.Error{Kind: engine.KindInvalid, Param: "continue_final_message",
				Message: "continue_final_message is set but the final message does not appear in the chat after applying the chat template"}
		}
	}
	return s, thinkingOff, nil
}

// ContinueFinal cuts rendered, a conversation rendered without a
// generation prompt, just after the last occurrence of final, the content
// of its final message, so that the template's end-of-turn after it is
// gone and the model continues the message. It is Hugging Face
// transformers' continue_final_message (which vLLM uses): the match is of
// final without its surrounding whitespace, and the cut keeps final's
// trailing whitespace only where the template kept it. It reports false
// when final does not appear in rendered.
func ContinueFinal(rendered, final string) (string, bool) {
	trimmed := strings.TrimSpace(final)
	at := strings.LastIndex(rendered, trimmed)
	if at < 0 {
		return "", false
	}
	if lead := strings.TrimLeftFunc(final, unicode.IsSpace); strings.HasPrefix(rendered[at:], lead) {
		return rendered[:at+len(lead)], true
	}
	return rendered[:at+len(trimmed)], true
}
