package netio

import "testing"

// TestWorkerOf: the access log's worker is the X-Vajra-Worker value among
// the session's header lines, nil without one.
func TestWorkerOf(t *testing.T) {
	for _, c := range []struct{ headers, want string }{
		{"X-Vajra-Worker: llama-server://127.0.0.1:8081\r\n", "llama-server://127.0.0.1:8081"},
		{"Retry-After: 1\r\nX-Vajra-Worker: vllm://h:1\r\n", "vllm://h:1"},
		{"Retry-After: 1\r\n", ""},
		{"", ""},
	} {
		got := workerOf([]byte(c.headers))
		if string(got) != c.want || (c.want == "") != (got == nil) {
			t.Errorf("workerOf(%q) = %q, want %q", c.headers, got, c.want)
		}
	}
}
