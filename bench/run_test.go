package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// fakeServer serves every dialect's canned stream (dialectStreams) on
// loopback, flushing after each event, and counts connections.
type fakeServer struct {
	*httptest.Server
	conns atomic.Int64
	reqs  atomic.Int64
	beta  atomic.Int64 // Realtime requests in the beta shape

	mu      sync.Mutex
	prompts []string // chat requests' first message
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	fs := &fakeServer{}
	mux := http.NewServeMux()
	for d, body := range dialectStreams {
		for _, base := range []string{"/v1", "/openai/v1"} {
			mux.HandleFunc("POST "+base+d.path(), func(w http.ResponseWriter, r *http.Request) {
				fs.reqs.Add(1)
				in, _ := io.ReadAll(r.Body)
				var req map[string]any
				if err := json.Unmarshal(in, &req); err != nil {
					http.Error(w, "bad json", 400)
					return
				}
				if msgs, _ := req["messages"].([]any); len(msgs) > 0 {
					if m, _ := msgs[0].(map[string]any); m != nil {
						c, _ := m["content"].(string)
						fs.mu.Lock()
						fs.prompts = append(fs.prompts, c)
						fs.mu.Unlock()
					}
				}
				if req["ignore_eos"] != true {
					http.Error(w, "ignore_eos missing", 400)
					return
				}
				if req["stream"] != true {
					w.Header().Set("Content-Type", "application/json")
					io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"abc"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`)
					return
				}
				if d == DialectChat {
					if so, _ := req["stream_options"].(map[string]any); so["include_usage"] != true {
						http.Error(w, "include_usage missing", 400)
						return
					}
				}
				w.Header().Set("Content-Type", "text/event-stream")
				fl := w.(http.Flusher)
				for _, ev := range strings.SplitAfter(body, "\n\n") {
					io.WriteString(w, ev)
					fl.Flush()
				}
			})
		}
	}
	mux.HandleFunc("GET /v1/realtime", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"session.created","event_id":"e0","session":{}}`))
		for {
			_, msg, err := c.Read(ctx)
			if err != nil {
				return
			}
			if !bytes.Contains(msg, []byte(`"response.create"`)) {
				continue
			}
			fs.reqs.Add(1)
			if r.Header.Get("OpenAI-Beta") == "realtime=v1" && bytes.Contains(msg, []byte(`"max_response_output_tokens":3`)) {
				fs.beta.Add(1)
			}
			for _, ev := range realtimeEvents {
				if err := c.Write(ctx, websocket.MessageText, []byte(ev)); err != nil {
					return
				}
			}
		}
	})
	fs.Server = httptest.NewUnstartedServer(mux)
	fs.Server.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			fs.conns.Add(1)
		}
	}
	fs.Start()
	t.Cleanup(fs.Close)
	return fs
}

func quickConfig(url string) Config {
	c := DefaultConfig()
	c.URL = url
	c.Warmup = 0
	c.Duration = 0
	c.Requests = 8
	c.Concurrency = 2
	c.MaxTokens = 3
	c.PromptTokens = 8
	c.MaxTime = 20 * time.Second
	c.RequestTimeout = 10 * time.Second
	return c
}

func TestRunEveryDialect(t *testing.T) {
	fs := newFakeServer(t)
	for _, d := range Dialects {
		if d == DialectEmbeddings {
			continue // no stream, no tokens: TestRunEmbeddings
		}
		t.Run(string(d), func(t *testing.T) {
			cfg := quickConfig(fs.URL)
			cfg.Dialect = d
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != 8 || res.Errors != 0 || res.TokensPerReq != 3 || res.UsageTokens != 24 || res.Tokens != 24 {
				t.Fatalf("requests %d errors %d (%v) tokens/req %v usage %d tokens %d", res.Requests, res.Errors, res.ErrorSamples, res.TokensPerReq, res.UsageTokens, res.Tokens)
			}
			if res.TTFT.Count != 8 || res.Gap.Count != 16 || res.E2E.Count != 8 || res.Head.Count != 8 {
				t.Fatalf("counts: ttft %d gap %d e2e %d head %d", res.TTFT.Count, res.Gap.Count, res.E2E.Count, res.Head.Count)
			}
		})
	}
}

func TestRunEmbeddings(t *testing.T) {
	var reqs atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
			Input string `json:"input"`
		}
		if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil || req.Input != BuildPrompt(8) || req.Model == "" {
			http.Error(w, `{"error":{"message":"bad request"}}`, 400)
			return
		}
		reqs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.6,0.8]}],"model":"m","usage":{"prompt_tokens":8,"total_tokens":8}}`)
	}))
	defer srv.Close()
	cfg := quickConfig(srv.URL)
	cfg.Dialect, cfg.Stream = DialectEmbeddings, false
	res, err := Run(context.Background(), cfg)
	if err != nil || res.Requests != 8 || res.Errors != 0 || reqs.Load() != 8 || res.E2E.Count != 8 {
		t.Fatalf("err %v requests %d errors %d (%v) served %d", err, res.Requests, res.Errors, res.ErrorSamples, reqs.Load())
	}
	cfg.Stream = true
	if _, err := Run(context.Background(), cfg); err == nil {
		t.Fatal("a streamed embeddings run was accepted")
	}
}

func TestRunKeepAliveAndBasePath(t *testing.T) {
	fs := newFakeServer(t)
	cfg := quickConfig(fs.URL)
	cfg.BasePath = "/openai/v1"
	cfg.Requests = 20
	res, err := Run(context.Background(), cfg)
	if err != nil || res.Requests != 20 || res.Errors != 0 {
		t.Fatalf("err %v requests %d errors %d %v", err, res.Requests, res.Errors, res.ErrorSamples)
	}
	// Each of the two streams keeps one connection; on a loaded machine
	// one stream may serve every request before the other has dialled,
	// so one connection is as right as two. Without keep-alive it is 20.
	if n := fs.conns.Load(); n < 1 || n > 2 {
		t.Fatalf("%d connections for 2 streams and 20 requests: keep-alive not reused", n)
	}
}

func TestRunNonStream(t *testing.T) {
	fs := newFakeServer(t)
	cfg := quickConfig(fs.URL)
	cfg.Stream = false
	res, err := Run(context.Background(), cfg)
	if err != nil || res.Requests != 8 || res.Errors != 0 || res.TokensPerReq != 3 {
		t.Fatalf("err %v %+v", err, res)
	}
}

// TestUniquePromptsAcrossRuns: -unique-prompts gives every request of a
// run its own prompt, and a second run against the same server none of
// the first run's (a server's prefix cache would hold them).
func TestUniquePromptsAcrossRuns(t *testing.T) {
	fs := newFakeServer(t)
	for range 2 {
		cfg := quickConfig(fs.URL)
		cfg.Stream, cfg.UniquePrompts = false, true
		if res, err := Run(context.Background(), cfg); err != nil || res.Errors != 0 {
			t.Fatalf("err %v %+v", err, res)
		}
	}
	seen := map[string]bool{}
	for _, p := range fs.prompts {
		if seen[p] {
			t.Fatalf("prompt %q sent twice in %d requests", p, len(fs.prompts))
		}
		seen[p] = true
	}
	if len(seen) < 16 {
		t.Fatalf("%d prompts, want the 2 runs' 16", len(seen))
	}
}

func TestRunOpenLoop(t *testing.T) {
	fs := newFakeServer(t)
	cfg := quickConfig(fs.URL)
	cfg.Rate = 500
	cfg.Requests = 20
	res, err := Run(context.Background(), cfg)
	if err != nil || res.Requests != 20 || res.Errors != 0 || res.Mode != "open" {
		t.Fatalf("err %v requests %d errors %d mode %s", err, res.Requests, res.Errors, res.Mode)
	}
}

func TestRunCountsStatusErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(503)
		io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error","code":"overloaded"}}`)
	}))
	defer srv.Close()
	res, err := Run(context.Background(), quickConfig(srv.URL))
	if err != nil || res.Errors != 8 || res.ErrorsByKind["status"] != 8 || res.Requests != 0 {
		t.Fatalf("err %v errors %d by kind %v", err, res.Errors, res.ErrorsByKind)
	}
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"-url", srv.URL, "-n", "2", "-c", "1", "-warmup", "0", "-quiet"}, &out, &errb)
	if code != 1 || !strings.Contains(out.String(), "status=2") {
		t.Fatalf("Main exit %d, stdout %q stderr %q", code, out.String(), errb.String())
	}
}

func TestRunDurationAndProcAndOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("timed run")
	}
	fs := newFakeServer(t)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"-url", fs.URL, "-c", "4", "-warmup", "200ms", "-duration", "500ms", "-max-tokens", "3",
		"-server-pid", itoa(os.Getpid()), "-itl", "1ms", "-progress", "100ms",
		"-out", filepath.Join(dir, "r.json"), "-html", filepath.Join(dir, "r.html")}
	if code := Main(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errb.String())
	}
	var res Result
	b, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil || json.Unmarshal(b, &res) != nil {
		t.Fatalf("json: %v", err)
	}
	if res.WindowS < 0.49 || res.WindowS > 0.6 || res.Requests == 0 || res.WarmupRequests == 0 {
		t.Fatalf("window %v requests %d warmup %d", res.WindowS, res.Requests, res.WarmupRequests)
	}
	if res.Server == nil || res.Server.CPUSeconds <= 0 || res.Server.PeakRSSBytes <= 0 || res.Server.CPUMicrosPerTok <= 0 {
		t.Fatalf("server stats %+v", res.Server)
	}
	if !strings.Contains(out.String(), "measure") {
		t.Fatalf("no progress lines in %q", out.String())
	}
	checkXML(t, filepath.Join(dir, "r.html"))
}

func TestCompareAndHTML(t *testing.T) {
	a, b := newFakeServer(t), newFakeServer(t)
	cfgA := quickConfig(a.URL)
	cfgB := quickConfig(b.URL)
	cfgB.Label = `B <"quoted"> & co`
	var prog bytes.Buffer
	cmp, err := Compare(context.Background(), cfgA, cfgB, 2, &prog)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmp.A) != 2 || len(cmp.B) != 2 || a.reqs.Load() != 16 || b.reqs.Load() != 16 {
		t.Fatalf("runs %d/%d, requests %d/%d", len(cmp.A), len(cmp.B), a.reqs.Load(), b.reqs.Load())
	}
	if got := prog.String(); !strings.Contains(got, "round 1/2: A") || strings.Index(got, "round 2/2: A") < strings.Index(got, "round 1/2: B") {
		t.Fatalf("not alternating: %q", got)
	}
	var found bool
	for _, f := range cmp.Figures {
		if f.Name == "tokens/s" {
			found = len(f.Ratios) == 2 && f.Ratio > 0
		}
	}
	if !found {
		t.Fatalf("no tokens/s ratio in %+v", cmp.Figures)
	}
	var txt bytes.Buffer
	cmp.WriteText(&txt)
	if !strings.Contains(txt.String(), "B/A") {
		t.Fatal(txt.String())
	}
	if _, err := json.Marshal(cmp); err != nil {
		t.Fatalf("comparison does not marshal: %v", err)
	}
	path := filepath.Join(t.TempDir(), "c.html")
	var sb strings.Builder
	WriteHTML(&sb, nil, cmp)
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	checkXML(t, path)
	if strings.Contains(sb.String(), `<"quoted">`) {
		t.Fatal("label not escaped")
	}
}

func TestHTMLEmptyResult(t *testing.T) {
	var sb strings.Builder
	WriteHTML(&sb, []*Result{{URL: "http://127.0.0.1:1"}}, nil)
	path := filepath.Join(t.TempDir(), "e.html")
	_ = os.WriteFile(path, []byte(sb.String()), 0o644)
	checkXML(t, path)
}

// checkXML parses an HTML report as XML and checks it holds its plots and
// nothing that would need the network or a script engine.
func checkXML(t *testing.T, path string) {
	t.Helper()
	checkXMLPlots(t, path, 5)
}

// checkXMLPlots is checkXML for a report of want plots.
func checkXMLPlots(t *testing.T, path string, want int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	svgs := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed: %v", path, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "svg":
				svgs++
			case "script", "img", "link", "iframe":
				t.Fatalf("report has a <%s>", se.Name.Local)
			}
		}
	}
	if svgs != want {
		t.Fatalf("%d SVG plots, want %d", svgs, want)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestRunDialErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	cfg := quickConfig(url)
	cfg.Requests = 3
	cfg.Concurrency = 1
	res, err := Run(context.Background(), cfg)
	if err != nil || res.ErrorsByKind["dial"] != 3 {
		t.Fatalf("err %v errors %v", err, res.ErrorsByKind)
	}
}

func TestRunRealtimeBeta(t *testing.T) {
	fs := newFakeServer(t)
	cfg := quickConfig(fs.URL)
	cfg.Dialect = DialectRealtime
	cfg.RealtimeBeta = true
	res, err := Run(context.Background(), cfg)
	if err != nil || res.Requests != 8 || res.Errors != 0 || fs.beta.Load() != 8 {
		t.Fatalf("err %v requests %d errors %d beta-shaped %d", err, res.Requests, res.Errors, fs.beta.Load())
	}
}

// -store -chain: each stream's requests name the previous response's id,
// Chain turns per conversation, streamed or not.
func TestRunChain(t *testing.T) {
	for _, stream := range []bool{false, true} {
		var mu sync.Mutex
		var prevs []string
		n := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req map[string]any
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req["store"] != true {
				http.Error(w, "want store: true", 400)
				return
			}
			mu.Lock()
			n++
			id := "resp_" + itoa(n)
			p, _ := req["previous_response_id"].(string)
			prevs = append(prevs, p)
			mu.Unlock()
			obj := `{"id":"` + id + `","object":"response","status":"completed","output":[],"usage":{"input_tokens":1,"output_tokens":3,"total_tokens":4}}`
			if !stream {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, obj)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; i < 3; i++ {
				io.WriteString(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\n")
			}
			io.WriteString(w, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":"+obj+"}\n\n")
		}))
		defer srv.Close()
		cfg := quickConfig(srv.URL)
		cfg.Dialect, cfg.Stream, cfg.Store, cfg.Chain = DialectResponses, stream, true, 3
		cfg.Concurrency, cfg.Requests = 1, 6
		res, err := Run(context.Background(), cfg)
		if err != nil || res.Errors != 0 {
			t.Fatalf("stream=%v: %v %+v", stream, err, res)
		}
		want := []string{"", "resp_1", "resp_2", "", "resp_4", "resp_5"}
		mu.Lock()
		got := prevs[:min(len(prevs), len(want))]
		mu.Unlock()
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("stream=%v: previous_response_id sequence %q, want %q", stream, got, want)
		}
	}
}

func TestChainNeedsStoreAndResponses(t *testing.T) {
	for _, c := range []Config{
		{Dialect: DialectChat, Store: true},
		{Dialect: DialectResponses, Chain: 2},
		{Dialect: DialectResponses, Store: true, Chain: -1},
	} {
		cfg := quickConfig("http://127.0.0.1:1")
		cfg.Dialect, cfg.Store, cfg.Chain = c.Dialect, c.Store, c.Chain
		if err := cfg.validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// TestRunSharedPrefix: -shared-prefix starts every prompt with one of the
// -prefix-groups shared prefixes, in turn, followed by words of its own:
// no two prompts are equal, every group is used.
func TestRunSharedPrefix(t *testing.T) {
	var mu sync.Mutex
	prompts := map[string]bool{}
	groups := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) != 1 {
			http.Error(w, "bad", 400)
			return
		}
		p := req.Messages[0].Content
		mu.Lock()
		prompts[p] = true
		g, _, _ := strings.Cut(p, ".")
		groups[g]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"abc"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`)
	}))
	t.Cleanup(srv.Close)
	cfg := quickConfig(srv.URL)
	cfg.Stream = false
	cfg.SharedPrefixTokens, cfg.PrefixGroups = 50, 3
	cfg.Requests = 9
	res, err := Run(context.Background(), cfg)
	if err != nil || res.Errors != 0 || res.SharedPrefix != 50 {
		t.Fatalf("err %v %+v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, n := range groups {
		total += n
	}
	if len(prompts) != total {
		t.Fatalf("%d distinct prompts of %d", len(prompts), total)
	}
	if len(groups) != 3 || groups["Shared context 0"] == 0 || groups["Shared context 2"] == 0 {
		t.Fatalf("groups %v", groups)
	}
	for p := range prompts {
		if n := len(strings.Fields(p)); n < 50+cfg.PromptTokens {
			t.Fatalf("a prompt of %d words: %q", n, p)
		}
	}
	cfg.Dialect = DialectRealtime
	if _, err := Run(context.Background(), cfg); err == nil {
		t.Fatal("-shared-prefix accepted for realtime")
	}
}

// TestRunUsageTokensPerSec: a stream whose events are not one token each, as
// a real model's are under ignore_eos (a special token streams no text, so
// no event) and as --stream-interval makes them (one event, several tokens):
// tokens/s counts the events, usage_tokens_per_s the server's own count, and
// the summary says so.
func TestRunUsageTokensPerSec(t *testing.T) {
	const events, usage = 3, 7 // "a", "bc", "d": 7 tokens by the server's count
	var pace atomic.Int64      // between events: the stream's own pacing
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for _, c := range []string{"a", "bc", "d"} {
			io.WriteString(w, `data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"`+c+`"},"finish_reason":null}]}`+"\n\n")
			fl.Flush()
			time.Sleep(time.Duration(pace.Load()))
		}
		io.WriteString(w, `data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`+"\n\n")
		io.WriteString(w, `data: {"object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":7,"total_tokens":15}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	cfg := quickConfig(srv.URL)
	res, err := Run(context.Background(), cfg)
	if err != nil || res.Errors != 0 || res.Requests != 8 {
		t.Fatalf("err %v, %d requests, %d errors %v", err, res.Requests, res.Errors, res.ErrorSamples)
	}
	if res.TokensPerReq != events || res.UsageTokens != 8*usage {
		t.Fatalf("tokens/request %v (want %d events), usage %d (want %d)", res.TokensPerReq, events, res.UsageTokens, 8*usage)
	}
	// -n alone, no warm-up: every event arrives in the window, so the
	// server's count over it is all the usage, and the rates are 3 to 7.
	if got, want := res.UsageTokensPerSec*res.WindowS, float64(8*usage); got < want-1e-6 || got > want+1e-6 {
		t.Fatalf("usage tokens/s %v over %vs = %v tokens, want %v", res.UsageTokensPerSec, res.WindowS, got, want)
	}
	if r := res.TokensPerSec / res.UsageTokensPerSec; r < float64(events)/usage-1e-9 || r > float64(events)/usage+1e-9 {
		t.Fatalf("events per token %v, want %v", r, float64(events)/usage)
	}
	var out bytes.Buffer
	res.WriteText(&out)
	if !strings.Contains(out.String(), "by the server's usage") || !strings.Contains(out.String(), "0.43 events per token") {
		t.Fatalf("summary does not give the server's count:\n%s", out.String())
	}
	// With a warm-up, the requests under way at its end made some of their
	// tokens before the window: the server's rate is still the window's
	// events times the tokens per event, not all their usage.
	pace.Store(int64(15 * time.Millisecond))
	cfg.Warmup = 100 * time.Millisecond
	res2, err := Run(context.Background(), cfg)
	if err != nil || res2.Errors != 0 || res2.WarmupRequests == 0 {
		t.Fatalf("err %v, %d errors, %d warm-up requests", err, res2.Errors, res2.WarmupRequests)
	}
	if r := res2.TokensPerSec / res2.UsageTokensPerSec; r < float64(events)/usage-1e-9 || r > float64(events)/usage+1e-9 {
		t.Fatalf("with a warm-up: events per token %v, want %v", r, float64(events)/usage)
	}
	// One event per token: the rates agree and the summary has no such line.
	res.UsageTokensPerSec = res.TokensPerSec
	out.Reset()
	res.WriteText(&out)
	if strings.Contains(out.String(), "by the server's usage") {
		t.Fatalf("usage line printed though the counts agree:\n%s", out.String())
	}
}
