package openai

import (
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// chatSeeds are committed seeds for FuzzDecodeChatRequest (more live in
// testdata/fuzz/FuzzDecodeChatRequest).
var chatSeeds = []string{
	`{"messages":[{"role":"user","content":"hi"}]}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}],"stop":["a"],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
	`{"messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{}}}}`,
	`{"temperature":"x","stream_options":{"include_usage":true},"n":1e9}`,
	`{"a":[1,{"b":"\u00e9\"}"}]}`,
	`[`, `{"`, `null`, `{"messages":[null]}`,
	`{"messages":[{"role":"user","content":"x"}],"structured_outputs":{"regex":"\\d+","choice":["a"]},"bad_words":["b"],"allowed_token_ids":[],"priority":-1}`,
	`{"messages":[{"role":"user","content":"x"}],"structured_outputs":{"json":"{\"type\":\"object\"}"},"response_format":{"type":"json_object"}}`,
}

// FuzzDecodeChatRequest checks that no body makes decoding or validation
// panic, and that errors always name a well-formed parameter.
func FuzzDecodeChatRequest(f *testing.F) {
	for _, s := range chatSeeds {
		f.Add([]byte(s))
	}
	f.Add(typicalChatBody)
	var r ChatRequest
	f.Fuzz(func(t *testing.T, body []byte) {
		if err := DecodeChatRequest(body, &r); err != nil {
			pe := err.(*ParamError)
			_ = pe.AppendBody(nil)
			return
		}
		var q engine.Request
		if pe := r.ToEngine(&q); pe != nil {
			_ = pe.AppendBody(nil)
		}
	})
}
