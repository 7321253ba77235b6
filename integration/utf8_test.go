package integration_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestBodyText sends every endpoint that takes a JSON body text that is
// not UTF-8 (RFC 8259 section 8.1: JSON text exchanged between systems MUST
// be UTF-8) or that escapes a lone UTF-16 surrogate (\ud800, which no
// UTF-8 text can hold, docs/compatibility.md): each is a 400 in the
// endpoint's error shape, naming the byte offset. Surrogate pairs, raw
// multi-byte characters and an escaped backslash before "ud800" are text
// and are served.
func TestBodyText(t *testing.T) {
	_, _, base := fleetServer(t, nil)
	addr := strings.TrimPrefix(base, "http://")
	const openaiShape, anthropicShape = "openai", "anthropic"
	endpoints := []struct {
		path, shape string
		body        func(text string) string // text is a JSON string's inside
	}{
		{"/v1/chat/completions", openaiShape, func(s string) string {
			return `{"model":"vajra-sim","max_tokens":2,"messages":[{"role":"user","content":"` + s + `"}]}`
		}},
		{"/v1/completions", openaiShape, func(s string) string {
			return `{"model":"vajra-sim","max_tokens":2,"prompt":"` + s + `"}`
		}},
		{"/v1/responses", openaiShape, func(s string) string {
			return `{"model":"vajra-sim","max_output_tokens":16,"input":"` + s + `"}`
		}},
		{"/v1/messages", anthropicShape, func(s string) string {
			return `{"model":"vajra-sim","max_tokens":2,"messages":[{"role":"user","content":"` + s + `"}]}`
		}},
		{"/v1/messages/count_tokens", anthropicShape, func(s string) string {
			return `{"model":"vajra-sim","messages":[{"role":"user","content":"` + s + `"}]}`
		}},
		{"/tokenize", openaiShape, func(s string) string {
			return `{"model":"vajra-sim","prompt":"` + s + `"}`
		}},
		{"/detokenize", openaiShape, func(s string) string {
			return `{"model":"vajra-sim","tokens":[1,2],"note":"` + s + `"}`
		}},
	}
	bad := []struct{ name, text, reason string }{
		{"invalid byte", "hi \xff there", "UTF-8"},
		{"truncated sequence", "hi \xe2\x82", "UTF-8"},
		{"overlong encoding", "hi \xc0\xaf", "UTF-8"},
		{"encoded surrogate", "hi \xed\xa0\x80", "UTF-8"},
		{"lone high surrogate", `hi \ud800 there`, "surrogate"},
		{"lone low surrogate", `hi \uDC00`, "surrogate"},
		{"high then not low", `\ud83d\u0041`, "surrogate"},
		{"high at the end", `x\ud83d`, "surrogate"},
		{"reversed pair", `\ude00\ud83d`, "surrogate"},
	}
	good := []struct{ name, text string }{
		{"surrogate pair", `hi \ud83d\ude00`},
		{"raw multi-byte", "hi \xf0\x9f\x98\x80 caf\xc3\xa9"},
		{"escaped backslash", `hi \\ud800`},
		{"replacement character", `\ufffd`},
	}
	post := func(path, body string) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", path, len(body), body)
	}
	for _, ep := range endpoints {
		for _, c := range bad {
			t.Run(ep.path+"/"+c.name, func(t *testing.T) {
				status, _, body := rawExchange(t, addr, post(ep.path, ep.body(c.text)))
				if status != 400 {
					t.Fatalf("status %d, want 400: %s", status, body)
				}
				msg := errorMessage(t, ep.shape, body)
				if !strings.Contains(msg, c.reason) || !strings.Contains(msg, "byte offset") {
					t.Errorf("message %q does not say %q and where", msg, c.reason)
				}
			})
		}
		for _, c := range good {
			t.Run(ep.path+"/"+c.name, func(t *testing.T) {
				status, _, body := rawExchange(t, addr, post(ep.path, ep.body(c.text)))
				if status != 200 {
					t.Fatalf("status %d, want 200: %s", status, body)
				}
			})
		}
	}
}

// errorMessage checks that body is an error in the given shape (OpenAI's
// {"error":{"message","type":"invalid_request_error",...}} or Anthropic's
// {"type":"error","error":{"type":"invalid_request_error","message"}}), and
// returns its message.
func errorMessage(t *testing.T, shape, body string) string {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	wantTop := ""
	if shape == "anthropic" {
		wantTop = "error"
	}
	if e.Type != wantTop || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
		t.Fatalf("error body %s is not in the %s shape", body, shape)
	}
	return e.Error.Message
}
