package netio_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/netio"
)

// TestAuthNoBypass tries every spelling of protected routes without a key
// (case, duplicate slashes, dot segments, percent-encoding, the /openai
// prefix, absolute-form targets, HTTP/1.0, an Expect: 100-continue body)
// against a netio server: each gets 401 in the route's dialect shape, or
// never reaches a handler. Only /health, /ping and /metrics are public,
// and /metrics not with ProtectMetrics.
func TestAuthNoBypass(t *testing.T) {
	for _, protect := range []bool{false, true} {
		addr := startServer(t, time.Millisecond, func(o *netio.Options) {
			o.APIKeys = []string{"key-one", "key-two"}
			o.ProtectMetrics = protect
		}).addr
		chat := `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`
		post := func(path, body string, extra ...string) string {
			return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s", path, strings.Join(extra, ""), len(body), body)
		}
		const openaiShape, anthropicShape, publicOK = "openai", "anthropic", "public"
		cases := []struct {
			name, req, want string
		}{
			{"models", "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"models HTTP/1.0", "GET /v1/models HTTP/1.0\r\n\r\n", openaiShape},
			{"models HTTP/1.0 keep-alive", "GET /v1/models HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", openaiShape},
			{"upper case", "GET /V1/MODELS HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"double slash", "GET //v1/models HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"inner double slash", "GET /v1//models HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"dot segment", "GET /v1/./models HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"dot-dot from public", "GET /health/../v1/models HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"dot-dot to public", "GET /v1/models/../../health HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"percent-encoded", "GET /v1/%6dodels HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"percent-encoded slash", "GET /v1%2fmodels HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"encoded public name", "GET /%68ealth HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"trailing slash public", "GET /health/ HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"public with suffix", "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"openai prefix", "GET /openai/v1/models HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"openai prefix twice", "GET /openai/openai/v1/models HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"openai prefix public", "GET /openai/health HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"absolute form", "GET http://x/v1/models HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"absolute form public host", "GET http://health/v1/models HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"query", "GET /v1/models?x=/health HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"model id", "GET /v1/models/vajra-sim HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"load", "GET /load HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"version", "GET /version HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"tokenize", post("/tokenize", `{"prompt":"x"}`), openaiShape},
			{"chat", post("/v1/chat/completions", chat), openaiShape},
			{"chat prefixed", post("/openai/v1/chat/completions", chat), openaiShape},
			{"chat expect-continue", post("/v1/chat/completions", chat, "Expect: 100-continue\r\n"), openaiShape},
			{"chat empty bearer", post("/v1/chat/completions", chat, "Authorization: Bearer \r\n"), openaiShape},
			{"chat wrong key", post("/v1/chat/completions", chat, "Authorization: Bearer key-three\r\n"), openaiShape},
			{"chat key prefix", post("/v1/chat/completions", chat, "Authorization: Bearer key-\r\n"), openaiShape},
			{"chat key + suffix", post("/v1/chat/completions", chat, "x-api-key: key-onex\r\n"), openaiShape},
			{"chat basic auth", post("/v1/chat/completions", chat, "Authorization: Basic a2V5LW9uZQ==\r\n"), openaiShape},
			{"messages", post("/v1/messages", chat, "anthropic-version: 2023-06-01\r\n"), anthropicShape},
			{"messages wrong x-api-key", post("/v1/messages", chat, "x-api-key: nope\r\n"), anthropicShape},
			{"options asterisk", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", openaiShape},
			{"health", "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", publicOK},
			{"ping", "GET /ping HTTP/1.0\r\n\r\n", publicOK},
		}
		metricsWant := publicOK
		if protect {
			metricsWant = openaiShape
		}
		cases = append(cases, struct{ name, req, want string }{"metrics", "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", metricsWant},
			struct{ name, req, want string }{"metrics HTTP/1.0", "GET /metrics HTTP/1.0\r\n\r\n", metricsWant})
		for _, c := range cases {
			status, head, body := rawExchange(t, addr, c.req)
			name := fmt.Sprintf("protect=%v %s", protect, c.name)
			switch c.want {
			case publicOK:
				if status != 200 {
					t.Errorf("%s: %d %s", name, status, body)
				}
			case openaiShape:
				if status != 401 || !strings.Contains(body, `"code":"invalid_api_key"`) || !strings.Contains(head, "application/json") {
					t.Errorf("%s: %d %q, want 401 in OpenAI's shape", name, status, body)
				}
			case anthropicShape:
				if status != 401 || !strings.HasPrefix(body, `{"type":"error","error":{"type":"authentication_error"`) {
					t.Errorf("%s: %d %q, want 401 in Anthropic's shape", name, status, body)
				}
			}
		}
		// Each accepted key, in each accepted header, gets through.
		for _, h := range []string{"Authorization: Bearer key-one\r\n", "Authorization: bearer key-two\r\n", "x-api-key: key-two\r\n"} {
			if status, _, body := rawExchange(t, addr, post("/v1/chat/completions", chat, h)); status != 200 {
				t.Errorf("protect=%v %q: %d %s", protect, h, status, body)
			}
			if status, _, body := rawExchange(t, addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n"+h+"\r\n"); status != 200 {
				t.Errorf("protect=%v metrics with %q: %d %s", protect, h, status, body)
			}
		}
	}
}
