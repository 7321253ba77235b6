package anthropic

import (
	"errors"
	"strings"
	"testing"
)

// TestDecodeText: Messages and count_tokens refuse a body that is not
// UTF-8 or that escapes a lone surrogate with a 400 invalid_request_error
// saying where.
func TestDecodeText(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"` + "\xff" + `"}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"\udc00"}]}`,
		`{"model":"m","max_tokens":1,"system":"\ud800","messages":[]}`,
	} {
		for name, err := range map[string]error{
			"messages":     DecodeMessagesRequest([]byte(body), new(MessagesRequest)),
			"count_tokens": DecodeCountTokensRequest([]byte(body), new(CountTokensRequest)),
		} {
			var e *Error
			if !errors.As(err, &e) || e.Status() != 400 || e.Kind.Type() != "invalid_request_error" || !strings.Contains(e.Message, "byte offset") {
				t.Errorf("%s %q: %v", name, body, err)
			}
		}
	}
	ok := `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"\ud83d\ude00 \\ud800"}]}`
	if err := DecodeMessagesRequest([]byte(ok), new(MessagesRequest)); err != nil {
		t.Errorf("a pair and an escaped backslash refused: %v", err)
	}
}
