package netio_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/netio"
)

// fakeControl records the control calls it is given.
type fakeControl struct {
	mu       sync.Mutex
	calls    []string
	sleeping bool
	err      error
}

func (f *fakeControl) record(s string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
	return f.err
}

func (f *fakeControl) ResetPrefixCache(_ context.Context, running, external bool) (bool, error) {
	err := f.record("reset " + map[bool]string{true: "running", false: "-"}[running] + " " + map[bool]string{true: "external", false: "-"}[external])
	return err == nil, err
}

func (f *fakeControl) Sleep(_ context.Context, level int, mode string) error {
	f.setSleeping(true)
	return f.record("sleep " + string(rune('0'+level)) + " " + mode)
}

func (f *fakeControl) WakeUp(_ context.Context, tags []string) (bool, error) {
	f.setSleeping(false)
	return true, f.record("wake " + strings.Join(tags, ","))
}

func (f *fakeControl) IsSleeping(context.Context) (bool, error) {
	f.mu.Lock()
	s := f.sleeping
	f.mu.Unlock()
	return s, f.record("is_sleeping")
}

func (f *fakeControl) setSleeping(s bool) {
	f.mu.Lock()
	f.sleeping = s
	f.mu.Unlock()
}

func (f *fakeControl) fail(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func call(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestControlRoutes: vLLM's engine control endpoints answer in vLLM's
// shapes through Options.Control, refuse bad parameters with 400, map an
// unavailable engine to 503, and are 404 without a controllable engine.
func TestControlRoutes(t *testing.T) {
	fc := &fakeControl{}
	s := startServer(t, 0, func(o *netio.Options) { o.Control = fc })
	base := "http://" + s.addr
	for _, c := range []struct{ method, path, want string }{
		{"POST", "/reset_prefix_cache", `{"success":true}`},
		{"POST", "/reset_prefix_cache?reset_running_requests=true&reset_external=true", `{"success":true}`},
		{"POST", "/sleep?level=0&mode=wait", `{"status":"sleeping","level":0}`},
		{"GET", "/is_sleeping", `{"is_sleeping":true}`},
		{"POST", "/wake_up?tags=scheduling", `{"status":"awake","tags":["scheduling"]}`},
		{"POST", "/wake_up", `{"status":"awake","tags":null}`},
		{"GET", "/is_sleeping", `{"is_sleeping":false}`},
		{"POST", "/sleep", `{"status":"sleeping","level":1}`},
	} {
		if status, body := call(t, c.method, base+c.path); status != 200 || body != c.want {
			t.Errorf("%s %s: %d %s, want %s", c.method, c.path, status, body, c.want)
		}
	}
	want := []string{"reset - -", "reset running external", "sleep 0 wait", "is_sleeping", "wake scheduling", "wake ", "is_sleeping", "sleep 1 abort"}
	fc.mu.Lock()
	calls := slices.Clone(fc.calls)
	fc.mu.Unlock()
	if !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
	for _, p := range []string{"/sleep?level=3", "/sleep?mode=later", "/reset_prefix_cache?reset_external=maybe"} {
		if status, body := call(t, "POST", base+p); status != 400 || !strings.Contains(body, `"error"`) {
			t.Errorf("POST %s: %d %s", p, status, body)
		}
	}
	if status, _ := call(t, "GET", base+"/sleep"); status != 405 {
		t.Errorf("GET /sleep: %d", status)
	}
	fc.fail(&engine.Error{Kind: engine.KindClosed, Message: "no engine is attached"})
	if status, body := call(t, "GET", base+"/is_sleeping"); status != 503 || !strings.Contains(body, "no engine is attached") {
		t.Errorf("with no engine attached: %d %s", status, body)
	}
	fc.fail(errors.New("Sleep mode is not enabled"))
	if status, body := call(t, "POST", base+"/sleep"); status != 500 || !strings.Contains(body, "Sleep mode is not enabled") {
		t.Errorf("a failed call: %d %s", status, body)
	}
	fc.fail(netio.ErrNoEngineControl)
	if status, body := call(t, "POST", base+"/reset_prefix_cache"); status != 404 || !strings.Contains(body, "vllm-core") {
		t.Errorf("no controllable engine: %d %s", status, body)
	}

	plain := startServer(t, 0, nil)
	for _, p := range []string{"/reset_prefix_cache", "/sleep", "/wake_up"} {
		if status, body := call(t, "POST", "http://"+plain.addr+p); status != 404 || !strings.Contains(body, "vllm-core") {
			t.Errorf("POST %s without Control: %d %s", p, status, body)
		}
	}
}
