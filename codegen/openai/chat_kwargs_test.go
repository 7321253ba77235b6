package openai

import (
	"testing"

	"github.com/vajra-go/vajra/engine"
)

func TestChatTemplateKwargsToEngine(t *testing.T) {
	r := decodeChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":false}}`)
	var req engine.Request
	if err := r.ToEngine(&req); err != nil {
		t.Fatal(err)
	}
	if string(req.ChatTemplateKwargs) != `{"enable_thinking":false}` {
		t.Fatalf("kwargs %q", req.ChatTemplateKwargs)
	}
	r = decodeChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":"no"}`)
	err := r.ToEngine(&engine.Request{})
	if err == nil || err.Param != "chat_template_kwargs" {
		t.Fatalf("a string kwargs: %+v", err)
	}
	r = decodeChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":null}`)
	req = engine.Request{}
	if err := r.ToEngine(&req); err != nil || req.ChatTemplateKwargs != nil {
		t.Fatalf("null kwargs: %v %q", err, req.ChatTemplateKwargs)
	}
}
