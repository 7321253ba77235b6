package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
)

// collected is what a requester received for one request.
type collected struct {
	frames  []byte
	text    map[int]string // typed deltas' text per choice
	outputs int            // notices taken
	final   *engine.Result
}

// requester is a test actor that asks for generations and collects their
// outputs; each request's result goes to done.
type requester struct {
	srv  *vajra.Server
	gens []*vajra.Generate
	got  map[*vajra.Generate]*collected
	done chan collectedFor
	// first, when set, is told of each request's first output.
	first chan *vajra.Generate
}

type collectedFor struct {
	g *vajra.Generate
	c *collected
}

func (r *requester) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.got = map[*vajra.Generate]*collected{}
		for _, g := range r.gens {
			r.got[g] = &collected{text: map[int]string{}}
			r.srv.Generate(ctx, g)
		}
	case *vajra.Output:
		c := r.got[m.Request]
		if !m.Take() {
			return
		}
		if c.outputs == 0 && r.first != nil {
			r.first <- m.Request
		}
		c.outputs++
		c.frames = append(c.frames, m.Frames...)
		for _, d := range m.Deltas {
			c.text[d.Choice] += string(d.Text)
		}
		if m.Final != nil {
			c.final = m.Final
			r.done <- collectedFor{m.Request, c}
		}
	}
}

// spawnRequester starts a requester for gens in srv's actor system.
func spawnRequester(t *testing.T, srv *vajra.Server, r *requester) *actor.PID {
	t.Helper()
	r.srv = srv
	if r.done == nil {
		r.done = make(chan collectedFor, len(r.gens))
	}
	return srv.ActorSystem().Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r }))
}

func waitCollected(t *testing.T, r *requester) collectedFor {
	t.Helper()
	select {
	case c := <-r.done:
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("no final output")
	}
	return collectedFor{}
}

func TestEmbedTypedDeltas(t *testing.T) {
	srv, _, _ := startServer(t, nil)
	g := &vajra.Generate{
		Messages: []engine.Message{{Role: "user", Content: question}},
		Sampling: engine.Sampling{N: 2, MaxTokens: 12, IgnoreEOS: true},
	}
	r := &requester{gens: []*vajra.Generate{g}}
	spawnRequester(t, srv, r)
	c := waitCollected(t, r).c
	res := c.final
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(res.Choices) != 2 || res.Usage.CompletionTokens != 24 || res.Usage.PromptTokens != promptTokens(t, g.Messages) {
		t.Fatalf("result: %d choices, usage %+v", len(res.Choices), res.Usage)
	}
	for _, ch := range res.Choices {
		if c.text[ch.Index] != ch.Text || ch.Text == "" || ch.FinishReason != engine.FinishLength {
			t.Errorf("choice %d: deltas %q, final %q (%s)", ch.Index, c.text[ch.Index], ch.Text, ch.FinishReason)
		}
	}
	if len(c.frames) != 0 {
		t.Errorf("typed output carried frames: %q", c.frames)
	}
}

func TestEmbedDialectFrames(t *testing.T) {
	srv, _, _ := startServer(t, nil)
	cases := []struct {
		dialect engine.Dialect
		chunked bool
		want    []string
	}{
		{engine.DialectChat, false, []string{`"object":"chat.completion.chunk"`, `"completion_tokens":8`, "data: [DONE]\n\n"}},
		{engine.DialectChat, true, []string{"\r\ndata: {", "0\r\n\r\n"}},
		{engine.DialectCompletions, false, []string{`"object":"text_completion"`, "data: [DONE]\n\n"}},
		{engine.DialectMessages, false, []string{"event: message_start\n", `"output_tokens":8`, "event: message_stop\n"}},
		{engine.DialectResponses, false, []string{"event: response.created\n", `"output_tokens":8`, "event: response.incomplete\n"}},
	}
	var gens []*vajra.Generate
	for _, tc := range cases {
		gens = append(gens, &vajra.Generate{
			Prompt: question, Dialect: tc.dialect, Chunked: tc.chunked, IncludeUsage: true,
			Sampling: engine.Sampling{MaxTokens: 8, IgnoreEOS: true},
		})
	}
	r := &requester{gens: gens}
	spawnRequester(t, srv, r)
	got := map[*vajra.Generate]*collected{}
	for range gens {
		c := waitCollected(t, r)
		got[c.g] = c.c
	}
	for i, tc := range cases {
		c := got[gens[i]]
		if c.final.Err != nil {
			t.Fatalf("%d: %v", tc.dialect, c.final.Err)
		}
		for _, w := range tc.want {
			if !bytes.Contains(c.frames, []byte(w)) {
				t.Errorf("dialect %d chunked %v: frames lack %q:\n%s", tc.dialect, tc.chunked, w, c.frames)
			}
		}
		if c.final.Usage.CompletionTokens != 8 {
			t.Errorf("dialect %d: usage %+v", tc.dialect, c.final.Usage)
		}
	}
}

// TestEmbedAlongsideHTTP runs 100 in-process generations and 100 HTTP
// streams at once on one server: every one ends with the usage its
// max_tokens and prompt give, and the metrics count all 200.
func TestEmbedAlongsideHTTP(t *testing.T) {
	const n, maxTokens = 100, 16
	srv, _, base := startServer(t, func(c *vajra.Config) { c.EngineConfig.MaxNumSeqs = 256 })
	msgs := []engine.Message{{Role: "user", Content: question}}
	wantPrompt := promptTokens(t, msgs)

	var gens []*vajra.Generate
	for i := 0; i < n; i++ {
		d := engine.DialectNone
		if i%2 == 1 {
			d = engine.DialectChat
		}
		gens = append(gens, &vajra.Generate{Messages: msgs, Dialect: d, IncludeUsage: true,
			Sampling: engine.Sampling{MaxTokens: maxTokens, IgnoreEOS: true}})
	}
	// Four requesters, so that requesters run in parallel too.
	var reqs []*requester
	for i := 0; i < 4; i++ {
		reqs = append(reqs, &requester{gens: gens[i*n/4 : (i+1)*n/4]})
	}

	client := newClient(base)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
				Model:         vajra.DefaultModelName,
				Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)},
				MaxTokens:     openai.Int(maxTokens),
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			}, ignoreEOS)
			var acc openai.ChatCompletionAccumulator
			for st.Next() {
				acc.AddChunk(st.Current())
			}
			if err := st.Err(); err != nil {
				errs <- err
				return
			}
			if acc.Usage.CompletionTokens != maxTokens || acc.Usage.PromptTokens != int64(wantPrompt) {
				errs <- fmt.Errorf("HTTP usage %+v", acc.Usage)
			}
		}()
	}
	for _, r := range reqs {
		spawnRequester(t, srv, r)
	}
	for _, r := range reqs {
		for range r.gens {
			c := waitCollected(t, r)
			res := c.c.final
			if res.Err != nil || res.Usage.CompletionTokens != maxTokens || res.Usage.PromptTokens != wantPrompt {
				t.Errorf("in-process: err %v, usage %+v", res.Err, res.Usage)
			}
			if c.g.Dialect == engine.DialectChat && !bytes.Contains(c.c.frames, []byte(fmt.Sprintf(`"completion_tokens":%d`, maxTokens))) {
				t.Errorf("chat frames lack the usage chunk")
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := scrapeSum(t, base, "vllm:request_success_total{"); got != 2*n {
		t.Errorf("vllm:request_success_total sums to %d, want %d", got, 2*n)
	}
}

// ignoreEOS makes an SDK request generate exactly max_tokens.
var ignoreEOS = option.WithJSONSet("ignore_eos", true)

// scrapeSum sums the samples of the metric lines starting with prefix.
func scrapeSum(t *testing.T, base, prefix string) int {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, prefix) {
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			sum += int(v)
		}
	}
	return sum
}

// TestEmbedRequesterStopFreesSlot: a requester that stops mid-generation
// gets its engine session aborted at once, and the engine's only slot
// serves the next request.
func TestEmbedRequesterStopFreesSlot(t *testing.T) {
	srv, obs, _ := startServer(t, func(c *vajra.Config) {
		c.EngineConfig.MaxNumSeqs = 1
		c.MaxConcurrentRequests = 1
		// The next request may arrive before the stopped session has
		// given its permit back (the engine's final comes first): it
		// waits for it rather than being refused.
		c.MaxQueuedRequests = 1
	})
	long := &vajra.Generate{Prompt: question, Sampling: engine.Sampling{MaxTokens: 8000, IgnoreEOS: true}}
	r := &requester{gens: []*vajra.Generate{long}, first: make(chan *vajra.Generate, 1)}
	pid := spawnRequester(t, srv, r)
	<-r.first
	stopped := time.Now()
	srv.ActorSystem().Root.Stop(pid)
	select {
	case res := <-obs.finals:
		if !errors.Is(res.Err, engine.ErrAborted) {
			t.Fatalf("final after the requester stopped: %+v", res.Err)
		}
		// Aborted, not run out (8,000 tokens at 1 ms would end it with
		// "length" and no error): the error above says so; the time is
		// logged only.
		t.Logf("aborted %v after the requester stopped", time.Since(stopped))
	case <-time.After(10 * time.Second):
		t.Fatal("the engine session was not aborted")
	}
	// The slot and the permit are free: the next request runs to its end.
	next := &vajra.Generate{Prompt: question, Sampling: engine.Sampling{MaxTokens: 4, IgnoreEOS: true}}
	r2 := &requester{gens: []*vajra.Generate{next}}
	spawnRequester(t, srv, r2)
	if res := waitCollected(t, r2).c.final; res.Err != nil || res.Usage.CompletionTokens != 4 {
		t.Fatalf("next request: %+v, %+v", res.Err, res.Usage)
	}
}

// cancelOnFirst cancels its request on the first output.
type cancelOnFirst struct {
	srv  *vajra.Server
	g    *vajra.Generate
	done chan *engine.Result
}

func (c *cancelOnFirst) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.srv.Generate(ctx, c.g)
	case *vajra.Output:
		m.Take()
		if m.Final != nil {
			c.done <- m.Final
			return
		}
		c.srv.Cancel(ctx, c.g)
	}
}

func TestEmbedCancel(t *testing.T) {
	srv, _, _ := startServer(t, nil)
	c := &cancelOnFirst{srv: srv, done: make(chan *engine.Result, 1),
		g: &vajra.Generate{Prompt: question, Sampling: engine.Sampling{MaxTokens: 8000, IgnoreEOS: true}}}
	srv.ActorSystem().Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return c }))
	select {
	case res := <-c.done:
		if !errors.Is(res.Err, engine.ErrAborted) {
			t.Fatalf("final after cancel: %+v", res.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no final after cancel")
	}
}

// TestEmbedAdmission: in-process and HTTP requests share the permits:
// with one permit and no queue, whichever holds it makes the other wait
// for nothing but a refusal.
func TestEmbedAdmission(t *testing.T) {
	srv, _, base := startServer(t, func(c *vajra.Config) { c.MaxConcurrentRequests = 1 })
	long := &vajra.Generate{Prompt: question, Sampling: engine.Sampling{MaxTokens: 8000, IgnoreEOS: true}}
	r := &requester{gens: []*vajra.Generate{long}, first: make(chan *vajra.Generate, 1)}
	pid := spawnRequester(t, srv, r)
	<-r.first
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model":"vajra-sim","prompt":"hi","max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 {
		t.Fatalf("HTTP while an in-process request holds the permit: %d", resp.StatusCode)
	}
	// A second in-process request is refused the same way.
	second := &vajra.Generate{Prompt: question, Sampling: engine.Sampling{MaxTokens: 2}}
	r2 := &requester{gens: []*vajra.Generate{second}}
	spawnRequester(t, srv, r2)
	if res := waitCollected(t, r2).c.final; !errors.Is(res.Err, engine.ErrOverloaded) {
		t.Fatalf("second in-process request: %+v", res.Err)
	}
	srv.ActorSystem().Root.Stop(pid)
	// The permit comes back: HTTP gets served.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model":"vajra-sim","prompt":"hi","max_tokens":2}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the permit did not come back: %d", resp.StatusCode)
		}
	}
}

func TestEmbedRefusals(t *testing.T) {
	srv, _, _ := startServer(t, nil)
	gens := []*vajra.Generate{
		{Model: "nope", Prompt: "hi"},
		{},
		{Prompt: "hi", Sampling: engine.Sampling{Temperature: 3}},
		{Prompt: "hi", Dialect: engine.DialectMessages, Sampling: engine.Sampling{N: 2}},
		{Prompt: strings.Repeat("sea ", 100000)},
	}
	want := []engine.ErrorKind{engine.KindInvalid, engine.KindInvalid, engine.KindInvalid, engine.KindInvalid, engine.KindContextLength}
	r := &requester{gens: gens}
	spawnRequester(t, srv, r)
	got := map[*vajra.Generate]*engine.Result{}
	for range gens {
		c := waitCollected(t, r)
		got[c.g] = c.c.final
	}
	for i, g := range gens {
		if e := got[g].Err; e == nil || e.Kind != want[i] {
			t.Errorf("%d: %+v, want kind %d", i, e, want[i])
		}
	}
}

// TestEmbedWithoutHTTP: a server that never starts its listener serves
// in-process requests and stops cleanly.
func TestEmbedWithoutHTTP(t *testing.T) {
	cfg := vajra.DefaultConfig()
	cfg.Sim.ITL = time.Millisecond
	srv, err := vajra.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := &vajra.Generate{Prompt: question, Sampling: engine.Sampling{MaxTokens: 3, IgnoreEOS: true}}
	r := &requester{gens: []*vajra.Generate{g}}
	spawnRequester(t, srv, r)
	if res := waitCollected(t, r).c.final; res.Err != nil || res.Usage.CompletionTokens != 3 {
		t.Fatalf("%+v %+v", res.Err, res.Usage)
	}
	// Stop cancels what is still live.
	long := &vajra.Generate{Prompt: question, Sampling: engine.Sampling{MaxTokens: 8000, IgnoreEOS: true}}
	r2 := &requester{gens: []*vajra.Generate{long}, first: make(chan *vajra.Generate, 1)}
	spawnRequester(t, srv, r2)
	<-r2.first
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if res := waitCollected(t, r2).c.final; !errors.Is(res.Err, engine.ErrAborted) {
		t.Fatalf("live request at Stop: %+v", res.Err)
	}
}

// TestEmbedDrain: a draining server refuses new in-process requests with
// KindClosed, and Shutdown waits for those running to end.
func TestEmbedDrain(t *testing.T) {
	srv, _, _ := startServer(t, nil)
	running := &vajra.Generate{Prompt: question, Sampling: engine.Sampling{MaxTokens: 40, IgnoreEOS: true}}
	r := &requester{gens: []*vajra.Generate{running}, first: make(chan *vajra.Generate, 1)}
	spawnRequester(t, srv, r)
	<-r.first
	srv.Drain()
	late := &vajra.Generate{Prompt: question, Sampling: engine.Sampling{MaxTokens: 2}}
	r2 := &requester{gens: []*vajra.Generate{late}}
	spawnRequester(t, srv, r2)
	if res := waitCollected(t, r2).c.final; !errors.Is(res.Err, engine.ErrClosed) {
		t.Fatalf("request while draining: %+v", res.Err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if res := waitCollected(t, r).c.final; res.Err != nil || res.Usage.CompletionTokens != 40 {
		t.Fatalf("request running at the drain: %+v %+v", res.Err, res.Usage)
	}
}
