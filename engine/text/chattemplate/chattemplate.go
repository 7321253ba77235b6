// Package chattemplate renders a model's Jinja chat template (the
// tokenizer.chat_template of a GGUF or a Hugging Face tokenizer_config.json)
// into the prompt text the model was trained on.
//
// The values a template sees follow Hugging Face transformers'
// apply_chat_template exactly, because real templates depend on them:
//
//   - messages: a list of dicts {role, content, name?, tool_calls?,
//     tool_call_id?, reasoning_content?}. content is always a string, ""
//     beside tool calls where an OpenAI client sends null (as llama.cpp
//     does: templates such as QwQ's call content.split() on every assistant
//     turn and would fail on none). tool_calls is a list of
//     {id?, type: "function", function: {name, arguments}} with arguments
//     parsed into a dict, as HF templates expect (they apply tojson or
//     iterate its items).
//   - tools: a list of {type: "function", function: {name, description?,
//     parameters?}} with parameters parsed, or none when there are none.
//   - add_generation_prompt, bos_token, eos_token, enable_thinking (only when
//     set) and the caller's chat_template_kwargs.
//   - raise_exception(msg), which fails the render with a *RaiseError, and
//     strftime_now(fmt).
//
// JSON objects keep their key order, and the tojson filter is Python's
// json.dumps with transformers' defaults (", " and ": " separators,
// ensure_ascii=False, indent and sort_keys honoured), so tool definitions
// reach the model byte for byte as transformers would render them.
//
// The engine is github.com/ardanlabs/jinja; see Template for the parts of
// Jinja it does not cover.
package chattemplate

import (
	"fmt"
	"time"

	"github.com/ardanlabs/jinja"
	"github.com/vajra-go/vajra/engine"
)

// Options are fixed for the life of a parsed template: they come from the
// model file.
type Options struct {
	// BOSToken and EOSToken are the text of the vocabulary's beginning- and
	// end-of-sequence tokens (bos_token and eos_token in the template).
	BOSToken string
	EOSToken string
	// Now is the clock read by strftime_now; nil means time.Now.
	Now func() time.Time
}

// RenderOptions vary per request.
type RenderOptions struct {
	// AddGenerationPrompt appends the header of an assistant turn, so that
	// the model's next tokens are its answer.
	AddGenerationPrompt bool
	// EnableThinking, when set, is passed as enable_thinking (Qwen3 and its
	// kin switch their reasoning block on it). Nil leaves it undefined.
	EnableThinking *bool
	// Extra holds the request's chat_template_kwargs. Values are JSON-like
	// Go values (nil, bool, float64, json.Number, string, []any,
	// map[string]any, json.RawMessage); a float64 that is a whole number
	// becomes an integer, as it was in the JSON it was decoded from. A key
	// may not replace messages, tools, add_generation_prompt, bos_token or
	// eos_token; EnableThinking, when set, wins over an enable_thinking key.
	Extra map[string]any
}

// Template is a parsed chat template.
//
// Safe for concurrent use: Render builds a fresh scope and fresh values for
// every call, and the compiled tree is never written after Parse.
//
// Known gaps of the underlying engine, relative to Python Jinja: a dict
// whose keys include "items", "keys", "values" or "get" returns that entry,
// not the method, for d.items() and the like (use the items filter, which is
// right); the {% filter %} block takes only a bare filter name; float output
// outside tojson uses Go's %g formatting (1.0 prints as 1).
type Template struct {
	tmpl *jinja.Template
	opts Options
}

// Parse compiles a chat template. Errors wrap ErrSyntax.
//
// Safe for concurrent use.
func Parse(src string, opts Options) (*Template, error) {
	t, err := jinja.Compile(rewriteFilters(src))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	return &Template{tmpl: t, opts: opts}, nil
}

// ChatMLSource is the template used when a model has none: ChatML, as
// llama.cpp falls back to. Each message is
// "<|im_start|>" role "\n" content "<|im_end|>\n", and the generation prompt
// is "<|im_start|>assistant\n". It has no notion of tools.
const ChatMLSource = `{%- for message in messages -%}
{{- '<|im_start|>' + message.role + '\n' + (message.content if message.content is string else '') + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- endif -%}`

// ChatML returns the fallback ChatML template (see ChatMLSource).
//
// Safe for concurrent use.
func ChatML(opts Options) *Template {
	t, err := Parse(ChatMLSource, opts)
	if err != nil {
		panic("chattemplate: ChatMLSource does not parse: " + err.Error())
	}
	return t
}

// Render renders msgs and tools into the prompt text.
//
// It fails with ErrToolArguments when a tool call's arguments or a tool's
// parameters are not valid JSON, with a *RaiseError (matching ErrRaised) when
// the template calls raise_exception, and with an error wrapping ErrRender
// for any other failure of the template. All three are the client's doing
// or the model's and map to 400.
//
// Safe for concurrent use.
func (t *Template) Render(msgs []engine.Message, tools []engine.Tool, o RenderOptions) (string, error) {
	data, err := t.context(msgs, tools, o)
	if err != nil {
		return "", err
	}
	out, err := t.tmpl.RenderValues(data)
	if err != nil {
		if re, ok := asRaise(err); ok {
			return "", re
		}
		return "", fmt.Errorf("%w: %w", ErrRender, err)
	}
	return out, nil
}

// context builds the template's top-level variables.
func (t *Template) context(msgs []engine.Message, tools []engine.Tool, o RenderOptions) (map[string]jinja.Value, error) {
	data := make(map[string]jinja.Value, 10+len(o.Extra))
	for k, v := range o.Extra {
		val, err := goValue(v)
		if err != nil {
			return nil, fmt.Errorf("%w: chat_template_kwargs %q: %w", ErrRender, k, err)
		}
		data[k] = val
	}
	mv, err := messagesValue(msgs)
	if err != nil {
		return nil, err
	}
	tv, err := toolsValue(tools)
	if err != nil {
		return nil, err
	}
	data["messages"] = mv
	data["tools"] = tv
	data["add_generation_prompt"] = jinja.NewBool(o.AddGenerationPrompt)
	data["bos_token"] = jinja.NewString(t.opts.BOSToken)
	data["eos_token"] = jinja.NewString(t.opts.EOSToken)
	if o.EnableThinking != nil {
		data["enable_thinking"] = jinja.NewBool(*o.EnableThinking)
	}
	now := t.opts.Now
	if now == nil {
		now = time.Now
	}
	data["raise_exception"] = jinja.NewCallable("raise_exception", raiseException)
	data["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		return strftimeNow(now(), args)
	})
	for name, fn := range filters {
		data[name] = jinja.NewCallable(name, fn)
	}
	return data, nil
}
