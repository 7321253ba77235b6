package openai

import (
	"strings"
	"testing"
)

// TestDecodeText: every decoder refuses a body that is not UTF-8 or that
// escapes a lone surrogate, with invalid_json and the path of the string
// at fault.
func TestDecodeText(t *testing.T) {
	decoders := map[string]func(body string) error{
		"chat": func(b string) error { return DecodeChatRequest([]byte(b), new(ChatRequest)) },
		"completions": func(b string) error {
			return DecodeCompletionRequest([]byte(b), new(CompletionRequest))
		},
		"responses": func(b string) error { return DecodeResponsesRequest([]byte(b), new(ResponsesRequest)) },
	}
	f := func(name, body, param string) {
		t.Helper()
		err := decoders[name](body)
		pe, ok := err.(*ParamError)
		if !ok || pe.Code != CodeInvalidJSON || pe.Param != param || !strings.Contains(pe.Message, "byte offset") {
			t.Errorf("%s %q: %#v, want invalid_json at %q", name, body, err, param)
		}
	}
	f("chat", `{"model":"m","messages":[{"role":"user","content":"a`+"\xff"+`"}]}`, "messages[0].content")
	f("chat", `{"model":"m","messages":[{"role":"user","content":"\ud800"}]}`, "messages[0].content")
	f("chat", `{"model":"m","`+"\xff"+`":1}`, "")
	f("completions", `{"model":"m","prompt":["ok","\udfff"]}`, "prompt[1]")
	f("responses", `{"model":"m","input":"`+"\xc3"+`"}`, "input")
	f("responses", `{"model":"m","instructions":"\ud83d\u0020"}`, "instructions")

	for name, dec := range decoders {
		body := `{"model":"m","prompt":"\ud83d\ude00","input":"\ud83d\ude00","messages":[{"role":"user","content":"\\ud800 caf` + "\xc3\xa9" + `"}]}`
		if err := dec(body); err != nil {
			t.Errorf("%s: a pair, an escaped backslash and UTF-8 refused: %v", name, err)
		}
	}
}
