package integration_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/internal/wiretest"
)

// capturing records what reaches the engine of each request's vLLM
// extensions (before the engine checks them).
type capturing struct {
	engine.Engine
	mu   sync.Mutex
	last engine.VLLMExtensions
}

func (c *capturing) Prepare(req *engine.Request) error {
	c.mu.Lock()
	c.last = engine.VLLMExtensions{}
	if req.VLLM != nil {
		c.last = *req.VLLM
	}
	c.mu.Unlock()
	return c.Engine.Prepare(req)
}

func (c *capturing) Unwrap() engine.Engine { return c.Engine }

// TestVLLMRequestHeaders: vLLM's request headers reach the engine as
// vLLM's front end applies them: X-Session-ID is the session when the
// body names none (the body's session_id wins), X-Vllm-Priority replaces
// the body's priority (the simulator has no priority scheduling, so a
// priority that reaches it is a 400 naming priority, and a header of 0
// clears the body's), and a header priority that is not an integer is
// ignored.
func TestVLLMRequestHeaders(t *testing.T) {
	var c *capturing
	_, _, base := startServerWrapped(t, nil, func(e engine.Engine) engine.Engine {
		c = &capturing{Engine: e}
		return c
	})
	addr := strings.TrimPrefix(base, "http://")
	post := func(extra string, headers ...string) (int, string, engine.VLLMExtensions) {
		t.Helper()
		body := `{"model":"` + vajra.DefaultModelName + `","max_tokens":2,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
		h := append([]string{"Content-Type", "application/json", "Authorization", "Bearer test-key"}, headers...)
		st, _, b := wiretest.Get(t, addr, "POST", "/v1/chat/completions", body, h...)
		c.mu.Lock()
		defer c.mu.Unlock()
		return st, b, c.last
	}
	if st, b, v := post("", "X-Session-ID", "conv-h"); st != 200 || v.SessionID != "conv-h" {
		t.Fatalf("X-Session-ID: %d %s, the engine got session %q", st, b, v.SessionID)
	}
	if st, b, v := post(`,"session_id":"conv-b"`, "X-Session-ID", "conv-h"); st != 200 || v.SessionID != "conv-b" {
		t.Fatalf("session_id and X-Session-ID: %d %s, the engine got session %q, want the body's", st, b, v.SessionID)
	}
	// vllm_xargs.session_id is the session only when neither the body's
	// field nor the header names one (the simulator runs no extension, so
	// the request itself is a 400 naming vllm_xargs, after the session is
	// settled).
	if st, b, v := post(`,"vllm_xargs":{"session_id":"conv-x"}`, "X-Session-ID", "conv-h"); st != 400 || !strings.Contains(b, `"param":"vllm_xargs"`) || v.SessionID != "conv-h" {
		t.Fatalf("vllm_xargs.session_id and X-Session-ID: %d %s, the engine got session %q, want the header's and a 400 naming vllm_xargs", st, b, v.SessionID)
	}
	if st, b, v := post(`,"vllm_xargs":{"session_id":"conv-x"}`); st != 400 || v.SessionID != "conv-x" {
		t.Fatalf("vllm_xargs.session_id alone: %d %s, the engine got session %q", st, b, v.SessionID)
	}
	if st, b, v := post("", "X-Vllm-Priority", "3"); st != 400 || !strings.Contains(b, `"param":"priority"`) || v.Priority != 3 {
		t.Fatalf("X-Vllm-Priority 3 on an engine without priorities: %d %s (engine got %d), want a 400 naming priority", st, b, v.Priority)
	}
	if st, b, v := post(`,"priority":5`, "X-Vllm-Priority", "0"); st != 200 || v.Priority != 0 {
		t.Fatalf("X-Vllm-Priority 0 over the body's 5: %d %s (engine got %d), want the header's 0", st, b, v.Priority)
	}
	if st, b, v := post("", "X-Vllm-Priority", "high"); st != 200 || v.Priority != 0 {
		t.Fatalf("X-Vllm-Priority that is no integer: %d %s (engine got %d), want it ignored", st, b, v.Priority)
	}
}
