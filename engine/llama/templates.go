package llama

import (
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/text/chattemplate"
)

// A GGUF may carry named chat templates besides its default one
// (tokenizer.chat_template.<name>). As llama-server does, a request with
// tools renders with the "tool_use" template when the model has one and
// no --chat-template overrides the model's own; every other request
// renders with the default.

// loadNamedTemplates parses the model's tool_use template into
// e.toolTmpl (nil without one). Called by New after loadTemplate.
func (e *Engine) loadNamedTemplates(opts chattemplate.Options) error {
	if e.cfg.ChatTemplate != "" {
		return nil
	}
	src := e.model.NamedChatTemplate("tool_use")
	if src == "" {
		return nil
	}
	t, err := chattemplate.Parse(src, opts)
	if err != nil {
		return err
	}
	e.toolTmpl = t
	return nil
}

// template is the template that renders a conversation with tools.
func (e *Engine) template(tools []engine.Tool) *chattemplate.Template {
	if len(tools) > 0 && e.toolTmpl != nil {
		return e.toolTmpl
	}
	return e.tmpl
}
