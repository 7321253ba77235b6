package integration_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/internal/eventually"
	"github.com/vajra-go/vajra/internal/fixture"
	"github.com/vajra-go/vajra/internal/testworker"
	"github.com/vajra-go/vajra/internal/vllmserver"
)

// The conformance suite: one set of cases, what a user of every API
// dialect checks, run against every engine behind the same server. An
// engine that lacks a capability declares it (engine.Lacker), and the
// case then asserts the refusal: a 400 before the status line of a 200
// that names the capability; an engine that declares nothing must serve
// it, so a capability silently dropped fails the case.
//
// Engines: the simulator; engine/llama on the tiny model; engine/remote in
// front of llama-server on the tiny model, and in front of the gRPC test
// worker (vllm://, fixed tokens over the Llama 3 tokenizer).
//
// TODO(lead): the vLLM engine core (engine/remote/vllmcore with a real
// `vllm serve --headless` from .vllm) is not in the table yet.

// Cases a fixture cannot show (not an engine's lack: the engine would do
// it with a real model).
const (
	fixConstrained = "constrained output" // tool_choice required, response_format
)

type confEngine struct {
	name  string
	model string
	// setup starts what the engine needs once (a worker) and returns the
	// function that starts a server on it.
	setup func(t *testing.T) confFront
	// fixture: cases this engine's fixture cannot show, with why.
	fixture map[string]string
}

// confFront starts a server on the engine with --stream-interval
// interval, its engine wrapped by the suite's wrappers (panicking
// formatters on request, the finals observed).
type confFront func(t *testing.T, interval int) *confServer

type confServer struct {
	base   string
	model  string
	finals chan *engine.Result
	eng    engine.Engine // the engine itself, unwrapped: what it declares
}

// wrap wraps e with the suite's panicking formatters and an observer of
// the final Results.
func (s *confServer) wrap(e engine.Engine) engine.Engine {
	s.eng = e
	return &observed{Engine: panickingFormatters{e}, finals: s.finals}
}

func confEngines() []confEngine {
	return []confEngine{
		{name: "sim", model: vajra.DefaultModelName, setup: func(t *testing.T) confFront {
			return func(t *testing.T, interval int) *confServer {
				s := &confServer{model: vajra.DefaultModelName, finals: make(chan *engine.Result, 1024)}
				_, _, s.base = startServerWrapped(t, func(c *vajra.Config) {
					c.EngineConfig.StreamInterval = interval
					c.EngineConfig.MaxModelLen = 1024
				}, s.wrap)
				return s
			}
		}},
		{name: "llama", model: tinyName, setup: func(t *testing.T) confFront {
			return func(t *testing.T, interval int) *confServer {
				s := &confServer{model: tinyName, finals: make(chan *engine.Result, 1024)}
				_, s.base = startLlama(t, func(c *vajra.Config) {
					c.EngineConfig.StreamInterval = interval
					e, err := llama.New(*llamaConfig(c))
					if err != nil {
						t.Fatal(err)
					}
					c.Engine = s.wrap(e)
				})
				return s
			}
		}},
		{name: "llama-server", model: tinyName,
			setup: func(t *testing.T) confFront {
				w := startWorker(t)
				front := remoteFront(workerURL(w))
				return func(t *testing.T, interval int) *confServer { return front(t, interval, nil) }
			}},
		{name: "grpc-worker", model: tinyName,
			fixture: map[string]string{fixConstrained: "the test worker generates fixed tokens: it does not run a grammar"},
			setup: func(t *testing.T) confFront {
				// The front loads the tokenizer itself, once (the worker
				// would stream its files, slow under the race detector).
				tok := llama3Tokenizer(t)
				w := testworker.Start(t, testworker.Config{ContextLength: 1024,
					ServedName: tinyName, Step: time.Millisecond, TokenBase: 1000})
				front := remoteFront("vllm://" + w.Addr)
				return func(t *testing.T, interval int) *confServer {
					return front(t, interval, func(c *remote.Config) { c.Tokenizer = tok })
				}
			}},
		{name: "vllm-core", model: tinyName, setup: func(t *testing.T) confFront {
			// vLLM's engine core (the CPU build, the tiny Llama of
			// random weights) attached to each front: an engine
			// attaches to one front, so each front starts its own.
			bin := vllmserver.Need(t)
			model := vllmserver.Model(t, bin)
			return func(t *testing.T, interval int) *confServer {
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				hs := lis.Addr().String()
				lis.Close()
				s := &confServer{model: tinyName, finals: make(chan *engine.Result, 1024)}
				srv, base := startRemote(t, func(c *vajra.Config) {
					c.EngineConfig.StreamInterval = interval
					rc := c.Remote
					rc.TokenizerPath = model
					rc.Workers = []string{"vllm-core://" + hs}
					e, err := remote.New(rc)
					if err != nil {
						t.Fatal(err)
					}
					c.Engine = s.wrap(e)
				}, "vllm-core://"+hs)
				s.base = base
				eng := vllmserver.StartHeadless(t, hs)
				eng.Wait(t, 15*time.Minute, func() bool {
					st, _, _ := get(t, srv.Addr().String(), "GET", "/health", "")
					return st == http.StatusOK
				})
				return s
			}
		}},
	}
}

// remoteFront starts servers in front of the worker at url, their
// remote engine's configuration changed by mutate when not nil.
func remoteFront(url string) func(t *testing.T, interval int, mutate func(*remote.Config)) *confServer {
	return func(t *testing.T, interval int, mutate func(*remote.Config)) *confServer {
		s := &confServer{model: tinyName, finals: make(chan *engine.Result, 1024)}
		_, s.base = startRemote(t, func(c *vajra.Config) {
			c.EngineConfig.StreamInterval = interval
			rc := c.Remote
			if mutate != nil {
				mutate(&rc)
			}
			e, err := remote.New(rc)
			if err != nil {
				t.Fatal(err)
			}
			c.Engine = s.wrap(e)
		}, url)
		// The engine serves once it has the worker's model information.
		eventually.Within(t, time.Minute, "/health 200", func() bool {
			st, _, _ := get(t, strings.TrimPrefix(s.base, "http://"), "GET", "/health", "")
			return st == http.StatusOK
		})
		return s
	}
}

var llama3Once struct {
	sync.Once
	tok remote.Tokenizer
	err error
}

// llama3Tokenizer is the Llama 3 tokenizer of `make tokenizers` (its
// folder: tokenizer.json and the chat template), loaded once per test
// binary, or a skip (a failure with VAJRA_REQUIRE_TOKENIZERS set).
func llama3Tokenizer(t *testing.T) remote.Tokenizer {
	t.Helper()
	p, err := fixture.Find("", filepath.Join(".tokenizers", "llama3", "package", "models", "tokenizer.json"),
		"the Llama 3 tokenizer is missing: run `make tokenizers`")
	tj := fixture.Need(t, "VAJRA_REQUIRE_TOKENIZERS", p, err)
	llama3Once.Do(func() { llama3Once.tok, llama3Once.err = remote.LoadTokenizer(filepath.Dir(tj)) })
	if llama3Once.err != nil {
		t.Fatal(llama3Once.err)
	}
	return llama3Once.tok
}

type confCase struct {
	name string
	run  func(t *testing.T, e *confEngine, s *confServer, front confFront)
}

var confCases = []confCase{
	{"dialects", confDialects},
	{"stream-interval", confStreamInterval},
	{"echo-logprobs", confEchoLogprobs},
	{"stop-across-tokens", confStopAcrossTokens},
	{"n", confN},
	{"tool-choice-required", confToolChoiceRequired},
	{"structured-output", confStructured},
	{"structured-outputs-grammar", confGrammarOutputs},
	{"vllm-sampling-extensions", confVLLMExtensions},
	{"abort-mid-stream", confAbort},
	{"panic", confPanic},
	{"context-length", confContextLength},
	{"cached-tokens", confCachedTokens},
}

// TestConformance runs every case on every engine.
func TestConformance(t *testing.T) {
	for _, e := range confEngines() {
		t.Run(e.name, func(t *testing.T) {
			front := e.setup(t)
			s := front(t, 0)
			for _, c := range confCases {
				t.Run(c.name, func(t *testing.T) { c.run(t, &e, s, front) })
			}
		})
	}
}

// ---- the wire, raw: what any client of the dialect sees

// confPost posts body and returns the status and the decoded JSON.
func confPost(t *testing.T, s *confServer, path string, body map[string]any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	res, err := http.Post(s.base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatalf("%s: status %d, body not JSON: %v", path, res.StatusCode, err)
	}
	return res.StatusCode, out
}

// confStream posts a streamed request and calls each for every SSE data
// payload (decoded; "[DONE]" as nil) until it returns false or the stream
// ends. It returns the status and the body of a refusal.
func confStream(t *testing.T, s *confServer, path string, body map[string]any, each func(ev map[string]any) bool) (int, map[string]any) {
	t.Helper()
	body["stream"] = true
	b, _ := json.Marshal(body)
	res, err := http.Post(s.base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		var out map[string]any
		json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	err = sseEvents(res.Body, func(_, data string) bool {
		var ev map[string]any
		if data != "[DONE]" {
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
		}
		return each(ev)
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, nil
}

// jget walks a decoded JSON value by keys and indices.
func jget(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func jstr(v any, path ...any) string { s, _ := jget(v, path...).(string); return s }
func jnum(v any, path ...any) int    { f, _ := jget(v, path...).(float64); return int(f) }

func chatBody(s *confServer, content string, maxTokens int) map[string]any {
	return map[string]any{"model": s.model, "messages": []any{map[string]any{"role": "user", "content": content}},
		"max_tokens": maxTokens, "temperature": 0, "seed": 7, "ignore_eos": true}
}

// chatStream runs a streamed chat request: the text of choice 0, the
// content chunks, the finish reasons by choice, the final usage.
type chatStreamed struct {
	text    []strings.Builder
	chunks  int
	finish  map[int]string
	usage   map[string]any
	errored string
}

func chatStream(t *testing.T, s *confServer, body map[string]any) (*chatStreamed, int, map[string]any) {
	t.Helper()
	body["stream_options"] = map[string]any{"include_usage": true}
	out := &chatStreamed{text: make([]strings.Builder, 8), finish: map[int]string{}}
	st, refusal := confStream(t, s, "/v1/chat/completions", body, func(ev map[string]any) bool {
		if ev == nil {
			return true
		}
		if e, ok := ev["error"]; ok {
			b, _ := json.Marshal(e)
			out.errored = string(b)
			return true
		}
		if u, ok := ev["usage"].(map[string]any); ok {
			out.usage = u
		}
		for _, c := range jget(ev, "choices").([]any) {
			i := jnum(c, "index")
			if d := jstr(c, "delta", "content"); d != "" {
				out.text[i].WriteString(d)
				out.chunks++
			}
			if f := jstr(c, "finish_reason"); f != "" {
				out.finish[i] = f
			}
		}
		return true
	})
	return out, st, refusal
}

// ---- the cases

// confDialects: in every dialect the streamed answer is the non-streamed
// one (greedy), with the same usage, and the usage adds up.
func confDialects(t *testing.T, _ *confEngine, s *confServer, _ confFront) {
	const n = 8
	// Chat completions.
	st, res := confPost(t, s, "/v1/chat/completions", chatBody(s, question, n))
	if st != 200 {
		t.Fatalf("chat: %d %v", st, res)
	}
	text := jstr(res, "choices", 0, "message", "content")
	u := res["usage"]
	if jnum(u, "completion_tokens") != n || jnum(u, "prompt_tokens") == 0 ||
		jnum(u, "total_tokens") != jnum(u, "prompt_tokens")+n || jstr(res, "choices", 0, "finish_reason") != "length" {
		t.Fatalf("chat: %v", res)
	}
	cs, st, _ := chatStream(t, s, chatBody(s, question, n))
	if st != 200 || cs.text[0].String() != text || cs.finish[0] != "length" ||
		jnum(cs.usage, "completion_tokens") != n || jnum(cs.usage, "prompt_tokens") != jnum(u, "prompt_tokens") {
		t.Fatalf("chat streamed %q finish %v usage %v; non-streamed %q usage %v", cs.text[0].String(), cs.finish, cs.usage, text, u)
	}

	// Completions.
	cb := func() map[string]any {
		return map[string]any{"model": s.model, "prompt": "The sea is", "max_tokens": n, "temperature": 0, "seed": 7, "ignore_eos": true}
	}
	st, res = confPost(t, s, "/v1/completions", cb())
	ctext := jstr(res, "choices", 0, "text")
	if st != 200 || jnum(res, "usage", "completion_tokens") != n || jstr(res, "choices", 0, "finish_reason") != "length" {
		t.Fatalf("completions: %d %v", st, res)
	}
	var streamed strings.Builder
	var susage map[string]any
	b := cb()
	b["stream_options"] = map[string]any{"include_usage": true}
	confStream(t, s, "/v1/completions", b, func(ev map[string]any) bool {
		streamed.WriteString(jstr(ev, "choices", 0, "text"))
		if u, ok := ev["usage"].(map[string]any); ok {
			susage = u
		}
		return true
	})
	if streamed.String() != ctext || jnum(susage, "completion_tokens") != n {
		t.Fatalf("completions streamed %q usage %v; non-streamed %q", streamed.String(), susage, ctext)
	}

	// Responses.
	rb := func() map[string]any {
		return map[string]any{"model": s.model, "input": question, "max_output_tokens": n, "temperature": 0}
	}
	st, res = confPost(t, s, "/v1/responses", rb())
	if st != 200 || jnum(res, "usage", "output_tokens") == 0 {
		t.Fatalf("responses: %d %v", st, res)
	}
	rtext := jstr(res, "output", 0, "content", 0, "text")
	streamed.Reset()
	var done map[string]any
	confStream(t, s, "/v1/responses", rb(), func(ev map[string]any) bool {
		switch jstr(ev, "type") {
		case "response.output_text.delta":
			streamed.WriteString(jstr(ev, "delta"))
		case "response.completed", "response.incomplete":
			done, _ = ev["response"].(map[string]any)
		}
		return true
	})
	if streamed.String() != rtext || jnum(done, "usage", "output_tokens") != jnum(res, "usage", "output_tokens") ||
		jnum(done, "usage", "input_tokens") != jnum(res, "usage", "input_tokens") {
		t.Fatalf("responses streamed %q %v; non-streamed %q %v", streamed.String(), jget(done, "usage"), rtext, res["usage"])
	}

	// Anthropic Messages.
	mb := func() map[string]any {
		return map[string]any{"model": s.model, "max_tokens": n, "temperature": 0,
			"messages": []any{map[string]any{"role": "user", "content": question}}}
	}
	st, res = confPost(t, s, "/v1/messages", mb())
	if st != 200 || jnum(res, "usage", "output_tokens") == 0 || jnum(res, "usage", "input_tokens") == 0 {
		t.Fatalf("messages: %d %v", st, res)
	}
	mtext := jstr(res, "content", 0, "text")
	streamed.Reset()
	// The prompt's tokens: input_tokens plus those read from the cache
	// (Anthropic counts them apart), as message_start says, or the
	// message_delta when it says again.
	in := jnum(res, "usage", "input_tokens") + jnum(res, "usage", "cache_read_input_tokens")
	var sin, outTok int
	var stop string
	confStream(t, s, "/v1/messages", mb(), func(ev map[string]any) bool {
		switch jstr(ev, "type") {
		case "message_start":
			sin = jnum(ev, "message", "usage", "input_tokens") + jnum(ev, "message", "usage", "cache_read_input_tokens")
		case "content_block_delta":
			streamed.WriteString(jstr(ev, "delta", "text"))
		case "message_delta":
			outTok, stop = jnum(ev, "usage", "output_tokens"), jstr(ev, "delta", "stop_reason")
			if u, ok := jget(ev, "usage").(map[string]any); ok && u["input_tokens"] != nil {
				sin = jnum(u, "input_tokens") + jnum(u, "cache_read_input_tokens")
			}
		}
		return true
	})
	if streamed.String() != mtext || sin != in || outTok != jnum(res, "usage", "output_tokens") ||
		stop != jstr(res, "stop_reason") {
		t.Fatalf("messages streamed %q prompt %d out %d stop %q; non-streamed %v", streamed.String(), sin, outTok, stop, res)
	}
}

// confStreamInterval: with --stream-interval 4 a chunk carries up to 4
// tokens: fewer chunks, the same text, every token counted.
func confStreamInterval(t *testing.T, _ *confEngine, s *confServer, front confFront) {
	const n, every = 16, 4
	one, _, _ := chatStream(t, s, chatBody(s, question, n))
	s4 := front(t, every)
	four, _, _ := chatStream(t, s4, chatBody(s4, question, n))
	if four.text[0].String() != one.text[0].String() || jnum(four.usage, "completion_tokens") != n {
		t.Fatalf("interval %d: %q usage %v; token by token %q", every, four.text[0].String(), four.usage, one.text[0].String())
	}
	if four.chunks > n/every+1 || four.chunks >= one.chunks {
		t.Fatalf("content chunks: %d with interval %d, %d token by token (%d tokens)", four.chunks, every, one.chunks, n)
	}
}

// confEchoLogprobs: completions with echo and logprobs return the
// prompt's text and a logprob entry for every prompt token (the first
// has none) and every new one.
func confEchoLogprobs(t *testing.T, _ *confEngine, s *confServer, _ confFront) {
	const prompt, n = "The sea is", 3
	body := map[string]any{"model": s.model, "prompt": prompt, "echo": true, "logprobs": 1, "max_tokens": n,
		"temperature": 0, "ignore_eos": true}
	st, res := confPost(t, s, "/v1/completions", body)
	if engine.Lacks(s.eng)&engine.CapPromptLogprobs != 0 {
		if st != 400 || !strings.Contains(jstr(res, "error", "message"), "prompt logprobs") {
			t.Fatalf("an engine that declares it lacks prompt logprobs answered %d %v; want a 400 that says so", st, res)
		}
		if st, res := confStream(t, s, "/v1/completions", body, func(map[string]any) bool { return true }); st != 400 {
			t.Fatalf("streamed: %d %v; want the 400 before the stream", st, res)
		}
		return
	}
	if st != 200 {
		t.Fatalf("%d %v", st, res)
	}
	text := jstr(res, "choices", 0, "text")
	lp := jget(res, "choices", 0, "logprobs")
	toks, _ := jget(lp, "tokens").([]any)
	vals, _ := jget(lp, "token_logprobs").([]any)
	tops, _ := jget(lp, "top_logprobs").([]any)
	want := jnum(res, "usage", "prompt_tokens") + n
	if !strings.HasPrefix(text, prompt) || len(toks) != want || len(vals) != want || len(tops) != want {
		t.Fatalf("echo: text %q, %d tokens %d logprobs %d tops; want %d (prompt + %d): %v", text, len(toks), len(vals), len(tops), want, n, lp)
	}
	if vals[0] != nil {
		t.Fatalf("the first prompt token has logprob %v, want null", vals[0])
	}
	for i, v := range vals[1:] {
		if f, ok := v.(float64); !ok || f > 0 || math.IsNaN(f) {
			t.Fatalf("token %d logprob %v", i+1, v)
		}
	}
	var gen strings.Builder
	for _, tk := range toks[want-n:] {
		gen.WriteString(tk.(string))
	}
	if !strings.HasSuffix(text, gen.String()) {
		t.Fatalf("the generated tokens %q are not the text's end %q", gen.String(), text)
	}
}

// confStopAcrossTokens: a stop string made of the end of one token and
// the start of the next ends the answer before it, streamed or not.
func confStopAcrossTokens(t *testing.T, _ *confEngine, s *confServer, _ confFront) {
	// The question, else (a random-weight model that answers chat with
	// newlines only: vLLM's tiny Llama) an answer it continues
	// (continue_final_message), as it continues text.
	bodies := []func() map[string]any{func() map[string]any { return chatBody(s, question, 24) }}
	for _, start := range []string{"Once upon a time", "The sea", "def main():", "Paris is", "1, 2,"} {
		bodies = append(bodies, func() map[string]any {
			b := chatBody(s, question, 24)
			b["messages"] = []any{map[string]any{"role": "user", "content": question},
				map[string]any{"role": "assistant", "content": start}}
			b["add_generation_prompt"], b["continue_final_message"] = false, true
			return b
		})
	}
	var text, stop string
	var at int
	var mk func() map[string]any
	for _, mk = range bodies {
		if text, stop, at = stopAcross(t, s, mk()); stop != "" {
			break
		}
	}
	if stop == "" {
		t.Fatalf("no two tokens to stop across in any answer, the last %q", text)
	}
	want := text[:at]
	for _, stream := range []bool{false, true} {
		b := mk()
		b["stop"] = []string{stop}
		var got, finish string
		if stream {
			cs, _, _ := chatStream(t, s, b)
			got, finish = cs.text[0].String(), cs.finish[0]
		} else {
			_, r := confPost(t, s, "/v1/chat/completions", b)
			got, finish = jstr(r, "choices", 0, "message", "content"), jstr(r, "choices", 0, "finish_reason")
		}
		if got != want || finish != "stop" {
			t.Fatalf("stream %v, stop %q: %q finish %q; want %q finish stop (of %q)", stream, stop, got, finish, want, text)
		}
	}
}

// stopAcross answers body with logprobs and finds in the answer a
// boundary between two tokens with text whose two characters around it
// first occur there: the stop string of those two characters and where
// it starts, or "" when there is none.
func stopAcross(t *testing.T, s *confServer, body map[string]any) (text, stop string, at int) {
	body["logprobs"] = true
	st, res := confPost(t, s, "/v1/chat/completions", body)
	if st != 200 {
		t.Fatalf("%d %v", st, res)
	}
	text = jstr(res, "choices", 0, "message", "content")
	lps, _ := jget(res, "choices", 0, "logprobs", "content").([]any)
	var prefix strings.Builder
	for k := 0; k+1 < len(lps); k++ {
		a, b := jstr(lps[k], "token"), jstr(lps[k+1], "token")
		prefix.WriteString(a)
		p := prefix.String()
		if !strings.HasPrefix(text, p+b) || k < 2 || a == "" || b == "" {
			continue
		}
		last, _ := utf8.DecodeLastRuneInString(a)
		first, _ := utf8.DecodeRuneInString(b)
		if last == utf8.RuneError || first == utf8.RuneError {
			continue
		}
		cand := string(last) + string(first)
		if i := strings.Index(text, cand); i == len(p)-len(string(last)) {
			return text, cand, i
		}
	}
	return text, "", 0
}

// confN: n = 3 gives three choices, each with its finish, counted in the
// usage, streamed or not.
func confN(t *testing.T, _ *confEngine, s *confServer, _ confFront) {
	const n, choices = 6, 3
	body := chatBody(s, question, n)
	body["n"] = choices
	st, res := confPost(t, s, "/v1/chat/completions", body)
	cs, _ := res["choices"].([]any)
	if st != 200 || len(cs) != choices || jnum(res, "usage", "completion_tokens") != n*choices {
		t.Fatalf("%d %v", st, res)
	}
	for i, c := range cs {
		if jnum(c, "index") != i || jstr(c, "finish_reason") != "length" {
			t.Fatalf("choice %d: %v", i, c)
		}
	}
	body = chatBody(s, question, n)
	body["n"] = choices
	str, st, _ := chatStream(t, s, body)
	if st != 200 || len(str.finish) != choices || jnum(str.usage, "completion_tokens") != n*choices {
		t.Fatalf("streamed: finish %v usage %v", str.finish, str.usage)
	}
	for i := range choices {
		if str.finish[i] != "length" || str.text[i].String() != jstr(cs[i], "message", "content") {
			t.Fatalf("streamed choice %d: %q finish %q; non-streamed %v", i, str.text[i].String(), str.finish[i], cs[i])
		}
	}
}

var confTools = []any{map[string]any{"type": "function", "function": map[string]any{
	"name": "get_weather", "description": "The weather in a city",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{
		"city": map[string]any{"type": "string", "enum": []string{"Paris", "Rome"}}},
		"required": []string{"city"}, "additionalProperties": false},
}}}

// confToolChoiceRequired: tool_choice required makes the answer a call
// of the tool with arguments its schema allows, streamed or not.
func confToolChoiceRequired(t *testing.T, e *confEngine, s *confServer, _ confFront) {
	if why, ok := e.fixture[fixConstrained]; ok {
		t.Skip(why)
	}
	check := func(name, args, finish string) {
		t.Helper()
		var a struct{ City string }
		if name != "get_weather" || json.Unmarshal([]byte(args), &a) != nil || (a.City != "Paris" && a.City != "Rome") || finish != "tool_calls" {
			t.Fatalf("call %q(%s) finish %q", name, args, finish)
		}
	}
	body := chatBody(s, "What is the weather in Paris?", 64)
	body["tools"], body["tool_choice"] = confTools, "required"
	delete(body, "ignore_eos")
	st, res := confPost(t, s, "/v1/chat/completions", body)
	if st != 200 {
		t.Fatalf("%d %v", st, res)
	}
	call := jget(res, "choices", 0, "message", "tool_calls", 0, "function")
	check(jstr(call, "name"), jstr(call, "arguments"), jstr(res, "choices", 0, "finish_reason"))

	var name, args, finish string
	body = chatBody(s, "What is the weather in Paris?", 64)
	body["tools"], body["tool_choice"] = confTools, "required"
	delete(body, "ignore_eos")
	confStream(t, s, "/v1/chat/completions", body, func(ev map[string]any) bool {
		if f := jget(ev, "choices", 0, "delta", "tool_calls", 0, "function"); f != nil {
			name += jstr(f, "name")
			args += jstr(f, "arguments")
		}
		if f := jstr(ev, "choices", 0, "finish_reason"); f != "" {
			finish = f
		}
		return true
	})
	check(name, args, finish)
}

// confStructured: response_format json_schema makes the answer a JSON
// value of the schema, in chat and (as vLLM's) completions.
func confStructured(t *testing.T, e *confEngine, s *confServer, _ confFront) {
	if why, ok := e.fixture[fixConstrained]; ok {
		t.Skip(why)
	}
	body := chatBody(s, "Is the sea blue? Answer in JSON.", 64)
	delete(body, "ignore_eos")
	body["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "answer",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}},
			"required": []string{"ok"}, "additionalProperties": false}}}
	st, res := confPost(t, s, "/v1/chat/completions", body)
	if st != 200 {
		t.Fatalf("%d %v", st, res)
	}
	var v struct{ Ok *bool }
	text := jstr(res, "choices", 0, "message", "content")
	if err := json.Unmarshal([]byte(text), &v); err != nil || v.Ok == nil {
		t.Fatalf("content %q is not the schema's JSON (%v); finish %q", text, err, jstr(res, "choices", 0, "finish_reason"))
	}
	// vLLM's completions take response_format too.
	comp := map[string]any{"model": s.model, "prompt": "Is the sea blue? Answer in JSON:", "max_tokens": 64,
		"temperature": 0, "response_format": body["response_format"]}
	if st, res = confPost(t, s, "/v1/completions", comp); st != 200 {
		t.Fatalf("completions: %d %v", st, res)
	}
	v.Ok = nil
	text = jstr(res, "choices", 0, "text")
	if err := json.Unmarshal([]byte(text), &v); err != nil || v.Ok == nil {
		t.Fatalf("completion %q is not the schema's JSON (%v); finish %q", text, err, jstr(res, "choices", 0, "finish_reason"))
	}
}

// confGrammarOutputs: vLLM's structured_outputs regex, choice and
// grammar, in chat and completions, make the answer a sentence of the
// constraint; an engine that declares it lacks them refuses each with a
// 400 naming structured_outputs, streamed or not.
func confGrammarOutputs(t *testing.T, e *confEngine, s *confServer, _ confFront) {
	cases := []struct {
		name  string
		so    map[string]any
		match func(string) bool
	}{
		{"regex", map[string]any{"regex": `[a-z]{2,6} [0-9]{2}`}, regexp.MustCompile(`^[a-z]{2,6} [0-9]{2}$`).MatchString},
		{"choice", map[string]any{"choice": []string{"blue", "green", "grey sea"}},
			func(c string) bool { return c == "blue" || c == "green" || c == "grey sea" }},
		{"grammar", map[string]any{"grammar": `root ::= "It is " ("blue" | "grey") "."`},
			func(c string) bool { return c == "It is blue." || c == "It is grey." }},
	}
	lacks := engine.Lacks(s.eng)&engine.CapGrammar != 0
	if _, ok := e.fixture[fixConstrained]; ok && !lacks {
		t.Skip(e.fixture[fixConstrained])
	}
	for _, c := range cases {
		chat := chatBody(s, "What colour is the sea?", 24)
		delete(chat, "ignore_eos")
		chat["structured_outputs"] = c.so
		comp := map[string]any{"model": s.model, "prompt": "The colour of the sea is", "max_tokens": 24,
			"temperature": 0, "structured_outputs": c.so}
		for _, q := range []struct {
			path string
			body map[string]any
			text []any
		}{{"/v1/chat/completions", chat, []any{"choices", 0, "message", "content"}}, {"/v1/completions", comp, []any{"choices", 0, "text"}}} {
			st, res := confPost(t, s, q.path, q.body)
			if lacks {
				if st != 400 || jstr(res, "error", "param") != "structured_outputs" {
					t.Fatalf("%s %s: an engine that lacks grammars answered %d %v; want a 400 naming structured_outputs", c.name, q.path, st, res)
				}
				if st, res := confStream(t, s, q.path, q.body, func(map[string]any) bool { return true }); st != 400 {
					t.Fatalf("%s %s streamed: %d %v; want the 400 before the stream", c.name, q.path, st, res)
				}
				continue
			}
			if st != 200 {
				t.Fatalf("%s %s: %d %v", c.name, q.path, st, res)
			}
			if text := jstr(res, q.text...); !c.match(text) || jstr(res, "choices", 0, "finish_reason") != "stop" {
				t.Errorf("%s %s: %q (finish %q) is not a sentence of %v", c.name, q.path, text, jstr(res, "choices", 0, "finish_reason"), c.so)
			}
		}
	}
	// A regex a grammar cannot say, and a grammar without its root, are
	// the request's 400 on every engine.
	for _, so := range []map[string]any{{"regex": `(?=a)b`}, {"grammar": `start ::= "a"`}} {
		body := chatBody(s, "x", 4)
		body["structured_outputs"] = so
		if st, res := confPost(t, s, "/v1/chat/completions", body); st != 400 || !strings.HasPrefix(jstr(res, "error", "param"), "structured_outputs") {
			t.Errorf("%v: %d %v; want a 400 naming structured_outputs", so, st, res)
		}
	}
}

// confVLLMExtensions: vLLM's bad_words, allowed_token_ids, priority,
// cache_salt and vllm_xargs are refused with a 400 naming each by an engine
// that declares it lacks them; an engine that has them answers.
func confVLLMExtensions(t *testing.T, _ *confEngine, s *confServer, _ confFront) {
	lacks := engine.Lacks(s.eng)
	for _, c := range []struct {
		param string
		value any
		c     engine.Capability
	}{{"bad_words", []string{"sea"}, engine.CapBadWords}, {"allowed_token_ids", []int{1, 2}, engine.CapAllowedTokenIDs}, {"priority", 2, engine.CapPriority},
		{"cache_salt", "tenant-a", engine.CapCacheSalt}, {"vllm_xargs", map[string]any{"mode": "strict", "k": 3}, engine.CapExtraArgs}} {
		body := chatBody(s, question, 4)
		body[c.param] = c.value
		st, res := confPost(t, s, "/v1/chat/completions", body)
		switch {
		case lacks&c.c != 0 && (st != 400 || jstr(res, "error", "param") != c.param):
			t.Errorf("%s: an engine that lacks it answered %d %v; want a 400 naming it", c.param, st, res)
		case lacks&c.c == 0 && st != 200:
			t.Errorf("%s: %d %v", c.param, st, res)
		}
	}
}

// confAbort: a client that goes away mid-stream aborts its request in
// the engine: the engine's final Result says aborted, before the tokens
// asked for were all made.
func confAbort(t *testing.T, _ *confEngine, s *confServer, _ confFront) {
	const n = 900
	chunks := 0
	st, _ := confStream(t, s, "/v1/chat/completions", chatBody(s, question, n), func(ev map[string]any) bool {
		if jstr(ev, "choices", 0, "delta", "content") != "" {
			chunks++
		}
		return chunks < 2 // then the body is closed
	})
	if st != 200 || chunks < 2 {
		t.Fatalf("status %d, %d chunks", st, chunks)
	}
	// Finals of the earlier cases' requests may still come (the sink gets
	// the final after the client got the answer): they ended unaborted,
	// with fewer tokens than n.
	stall := time.After(30 * time.Second) // a stall detector
	for {
		select {
		case res := <-s.finals:
			if res.Err == nil && res.Usage.CompletionTokens < n {
				continue
			}
			if res.Err == nil || !errors.Is(res.Err, engine.ErrAborted) || res.Usage.CompletionTokens >= n {
				t.Fatalf("the engine ended the request with %v after %d tokens; want aborted before %d", res.Err, res.Usage.CompletionTokens, n)
			}
			return
		case <-stall:
			t.Fatal("the engine did not end the aborted request")
		}
	}
}

// confPanic: a panic in the engine's goroutine (the request's Formatter)
// ends that stream with the in-stream server error, after the 200 and
// its first chunks; the next request is served.
func confPanic(t *testing.T, _ *confEngine, s *confServer, _ confFront) {
	cs, st, _ := chatStream(t, s, chatBody(s, "PANIC-IN-FORMATTER please", 12))
	if st != 200 || cs.chunks < 1 || len(cs.finish) != 0 || !strings.Contains(cs.errored, "server_error") {
		t.Fatalf("status %d, %d chunks, finish %v, error %q; want chunks then the server error event", st, cs.chunks, cs.finish, cs.errored)
	}
	after, st, _ := chatStream(t, s, chatBody(s, question, 4))
	if st != 200 || after.finish[0] != "length" {
		t.Fatalf("after the panic: %d, finish %v", st, after.finish)
	}
}

// confContextLength: a prompt longer than the context is a 400 that
// says so, before any stream starts.
func confContextLength(t *testing.T, _ *confEngine, s *confServer, _ confFront) {
	long := strings.Repeat("The sea is wide and deep. ", 400)
	for _, stream := range []bool{false, true} {
		var st int
		var res map[string]any
		if stream {
			_, st, res = chatStream(t, s, chatBody(s, long, 8))
		} else {
			st, res = confPost(t, s, "/v1/chat/completions", chatBody(s, long, 8))
		}
		if msg := jstr(res, "error", "message"); st != 400 || !strings.Contains(msg, "context") {
			t.Fatalf("stream %v: %d %v; want a 400 about the context length", stream, st, res)
		}
	}
}

// confCachedTokens: the same prompt again reports its cached tokens.
func confCachedTokens(t *testing.T, _ *confEngine, s *confServer, _ confFront) {
	// Longer than a block of vLLM's CPU cache (128 tokens): it caches
	// whole blocks only.
	prompt := strings.Repeat("The sea is wide and deep. ", 20) + "Tell me more."
	var cached, prompts int
	for range 2 {
		st, res := confPost(t, s, "/v1/chat/completions", chatBody(s, prompt, 2))
		if st != 200 {
			t.Fatalf("%d %v", st, res)
		}
		cached, prompts = jnum(res, "usage", "prompt_tokens_details", "cached_tokens"), jnum(res, "usage", "prompt_tokens")
	}
	if cached <= 0 || cached > prompts {
		t.Fatalf("the repeated prompt: %d cached of %d", cached, prompts)
	}
}
