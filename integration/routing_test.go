package integration_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/internal/eventually"
	"github.com/vajra-go/vajra/internal/llamaserver"
)

// Tests of routing over several real llama-server workers (engine/route):
// a tiny model, 2 slots each, short outputs, so that they run on a loaded
// 2-core machine. They skip without `make llama-server` (fail with
// VAJRA_REQUIRE_LLAMA_SERVER).

// startWorkers starts n llama-servers on one tiny model.
func startWorkers(t *testing.T, n int) []*llamaserver.Server {
	t.Helper()
	ws, _ := startWorkersModel(t, n)
	return ws
}

// startWorkersModel is startWorkers, also returning the model file.
func startWorkersModel(t *testing.T, n int) ([]*llamaserver.Server, string) {
	t.Helper()
	llamaserver.Need(t)
	model, err := tinymodel.TempFile(t.TempDir(), tinymodel.Config{Context: 4096})
	if err != nil {
		t.Fatal(err)
	}
	ws := make([]*llamaserver.Server, n)
	var wg sync.WaitGroup
	for i := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws[i] = llamaserver.Start(t, model, "-np", "2", "-c", "8192", "-t", "1")
		}()
	}
	wg.Wait()
	for _, w := range ws {
		if w == nil {
			t.FailNow()
		}
	}
	return ws, model
}

// routedServer runs a Vajra node over ws with policy.
func routedServer(t *testing.T, ws []*llamaserver.Server, policy string, mutate func(*vajra.Config)) string {
	t.Helper()
	cfg := vajra.DefaultConfig()
	cfg.Port, cfg.Loops = 0, 1
	cfg.APIKeys = []string{"test-key"}
	cfg.ServedModelNames = []string{"vajra-tiny"}
	for _, w := range ws {
		cfg.Remote.Workers = append(cfg.Remote.Workers, "llama-server://"+w.Addr())
	}
	cfg.Remote.HealthInterval = 200 * time.Millisecond
	cfg.Routing.Policy = policy
	cfg.WorkerHeader = true
	if mutate != nil {
		mutate(&cfg)
	}
	_, base := runServer(t, cfg)
	return base
}

type msg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatOut struct {
	Content string
	Prompt  int
	Cached  int
	Worker  string // X-Vajra-Worker, when sent
}

var httpClient = &http.Client{Timeout: 60 * time.Second}

// chatCall makes one non-streamed chat completion.
func chatCall(base string, msgs []msg, maxTokens int) (chatOut, error) {
	body, _ := json.Marshal(map[string]any{"model": "vajra-tiny", "messages": msgs, "max_tokens": maxTokens,
		"temperature": 0, "seed": 1})
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer test-key")
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return chatOut{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return chatOut{}, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens  int `json:"prompt_tokens"`
			PromptDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) == 0 {
		return chatOut{}, fmt.Errorf("response %s: %v", b, err)
	}
	return chatOut{Content: out.Choices[0].Message.Content, Prompt: out.Usage.PromptTokens,
		Cached: out.Usage.PromptDetails.CachedTokens, Worker: resp.Header.Get("X-Vajra-Worker")}, nil
}

// workerStats reads GET /workers.
type workerStat struct {
	URL      string `json:"url"`
	State    string `json:"state"`
	Circuit  string `json:"circuit"`
	InFlight int    `json:"in_flight"`
	Requests uint64 `json:"requests"`
	Errors   uint64 `json:"errors"`
}

func workersOf(t *testing.T, base string) []workerStat {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/workers", nil)
	req.Header.Set("Authorization", "Bearer test-key")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Policy  string       `json:"policy"`
		Workers []workerStat `json:"workers"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/workers: %d %s", resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("/workers: %s: %v", b, err)
	}
	return out.Workers
}

// systemPrompt is a long system prompt (several hundred tokens) made
// distinct by tag.
func systemPrompt(tag string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are assistant %s. ", tag)
	for i := 0; b.Len() < 2400; i++ {
		fmt.Fprintf(&b, "Rule %d of %s: answer briefly, cite the rule number, and never repeat a rule verbatim. ", i, tag)
	}
	return b.String()
}

// conversations runs convs conversations of turns turns each over base,
// each turn's requests at once, every conversation with the same long
// system prompt, and returns the fraction of follow-up requests whose
// cached tokens cover at least the previous turn's prompt (the worker
// held the conversation).
func conversations(t *testing.T, base, tag string, convs, turns int) float64 {
	t.Helper()
	sys := systemPrompt(tag)
	hist := make([][]msg, convs)
	prev := make([]int, convs)
	where := make([]string, convs)
	same := 0
	for c := range hist {
		hist[c] = []msg{{"system", sys}}
	}
	hits, follow := 0, 0
	var mu sync.Mutex
	for turn := 0; turn < turns; turn++ {
		var wg sync.WaitGroup
		errs := make(chan error, convs)
		for c := 0; c < convs; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A turn of a few hundred tokens: more than a routing block
				// (64 tokens), as a real conversation's turns are.
				q := fmt.Sprintf("Conversation %d of %s, question %d: what does rule %d say? ", c, tag, turn, c*7+turn)
				hist[c] = append(hist[c], msg{"user", q + strings.Repeat(fmt.Sprintf("Context %d-%d. ", c, turn), 40)})
				out, err := chatCall(base, hist[c], 4)
				if err != nil {
					errs <- err
					return
				}
				hist[c] = append(hist[c], msg{"assistant", out.Content})
				mu.Lock()
				defer mu.Unlock()
				if out.Worker == "" {
					errs <- fmt.Errorf("no X-Vajra-Worker")
					return
				}
				if turn > 0 {
					follow++
					if out.Cached >= prev[c]-8 {
						hits++
					}
					if out.Worker == where[c] {
						same++
					}
				}
				if testing.Verbose() {
					t.Logf("%s conv %d turn %d: %s prompt %d cached %d", tag, c, turn, out.Worker, out.Prompt, out.Cached)
				}
				prev[c], where[c] = out.Prompt, out.Worker
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	t.Logf("%s: %d of %d follow-ups cached their conversation, %d stayed on their worker", tag, hits, follow, same)
	return float64(hits) / float64(follow)
}

// TestRoutingCacheAware: with cache_aware, follow-ups of conversations
// sharing a long system prompt land on the worker holding their
// conversation (cached tokens cover the previous turn) in >= 90 % of
// cases; round_robin over the same workers, in far fewer.
func TestRoutingCacheAware(t *testing.T) {
	ws := startWorkers(t, 3)
	ca := routedServer(t, ws, "cache_aware", nil)
	rr := routedServer(t, ws, "round_robin", nil)
	const convs, turns = 5, 4
	caHit := conversations(t, ca, "ca", convs, turns)
	rrHit := conversations(t, rr, "rr", convs, turns)
	t.Logf("follow-ups holding their conversation: cache_aware %.0f %%, round_robin %.0f %%", 100*caHit, 100*rrHit)
	if caHit < 0.9 {
		t.Errorf("cache_aware: %.0f %% of follow-ups cached their conversation, want >= 90 %%", 100*caHit)
	}
	// Round robin's share depends on the order in which each turn's
	// concurrent requests arrive (7-60 % in runs on a loaded machine);
	// what tells the policies apart is that it misses the bar.
	if rrHit >= 0.9 {
		t.Errorf("round_robin: %.0f %% of follow-ups cached their conversation: the test does not tell the policies apart", 100*rrHit)
	}
	st := workersOf(t, ca)
	if len(st) != 3 {
		t.Fatalf("/workers: %+v", st)
	}
	for _, s := range st {
		if s.State != "healthy" || s.Circuit != "closed" || s.Errors != 0 {
			t.Fatalf("/workers: %+v", s)
		}
	}
}

// TestRoutingHotPrefixSpreads: requests of one prefix at once, more than
// a worker's slots, do not all go to the worker holding it.
func TestRoutingHotPrefixSpreads(t *testing.T) {
	ws := startWorkers(t, 3)
	base := routedServer(t, ws, "cache_aware", nil)
	sys := systemPrompt("hot")
	// Warm one worker with the prefix.
	if _, err := chatCall(base, []msg{{"system", sys}, {"user", "warm up"}}, 2); err != nil {
		t.Fatal(err)
	}
	before := workersOf(t, base)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := chatCall(base, []msg{{"system", sys}, {"user", fmt.Sprintf("hot question %d", i)}}, 48); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	after := workersOf(t, base)
	used := 0
	var got []uint64
	for i := range after {
		d := after[i].Requests - before[i].Requests
		got = append(got, d)
		if d > 0 {
			used++
		}
	}
	t.Logf("6 requests of one hot prefix per worker: %v", got)
	if used < 2 {
		t.Fatalf("6 requests at once of one prefix all went to one worker of 2 slots: %v", got)
	}
}

// stream is one streamed chat completion's outcome.
type stream struct {
	worker string // X-Vajra-Worker
	tokens int
	done   bool // ended with [DONE] (which also follows an error event)
	errEv  bool // sent an error event
	err    error
}

// streamCall runs one streamed chat completion to its end; first, when
// not nil, is closed at its first content event.
func streamCall(base string, msgs []msg, maxTokens int, first chan<- struct{}) stream {
	body, _ := json.Marshal(map[string]any{"model": "vajra-tiny", "messages": msgs, "max_tokens": maxTokens,
		"stream": true, "temperature": 0, "ignore_eos": true})
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer test-key")
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return stream{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return stream{err: fmt.Errorf("status %d: %s", resp.StatusCode, b)}
	}
	s := stream{worker: resp.Header.Get("X-Vajra-Worker")}
	err = sseEvents(resp.Body, func(_, data string) bool {
		switch {
		case data == "[DONE]":
			s.done = true
		case strings.HasPrefix(data, `{"error"`):
			s.errEv = true
		case strings.Contains(data, `"content"`):
			if s.tokens == 0 && first != nil {
				close(first)
			}
			s.tokens++
		}
		return true
	})
	if err != nil && s.err == nil {
		s.err = err
	}
	return s
}

// TestRoutingWorkerKilled: a worker killed under load costs only the
// streams on it (each ends with an error event, none is retried after its
// first byte: no stream both errs and finishes), new requests succeed on
// the others within 1 s, and the worker gets traffic again within 10 s of
// its return.
func TestRoutingWorkerKilled(t *testing.T) {
	ws, model := startWorkersModel(t, 3)
	// The model's own tokenizer: with the workers' (/tokenize) the engine
	// asks the first worker that answered, and that is the one killed.
	base := routedServer(t, ws, "least_load", func(c *vajra.Config) { c.Remote.TokenizerPath = model })
	victim := "llama-server://" + ws[0].Addr()
	// Load: 4 streams at once, long enough to be running at the kill, on
	// 6 slots (3 workers of 2), so that the survivors keep a free slot
	// for the requests after the kill: with every slot busy those would
	// queue on llama-server behind a 2,000-token stream, and the time to
	// their success would measure the machine's speed, not the routing.
	// Every stream is waited for until its first token has reached the
	// client: one killed before that may rightly be sent again to another
	// worker (it has lost nothing), and CI saw one do so and finish with
	// [DONE]. 2,000 tokens each, so that they still run at the kill.
	const streams = 4
	results := make(chan stream, streams)
	firsts := make([]chan struct{}, streams)
	for i := 0; i < streams; i++ {
		firsts[i] = make(chan struct{})
		go func() {
			results <- streamCall(base, []msg{{"user", fmt.Sprintf("stream %d", i)}}, 2000, firsts[i])
		}()
	}
	for _, f := range firsts {
		select {
		case <-f:
		case <-time.After(time.Minute): // a stall detector
			t.Fatal("a stream got no token within a minute")
		}
	}
	// The victim runs some of them.
	onVictim := 0
	for _, s := range workersOf(t, base) {
		if s.URL == victim {
			onVictim = s.InFlight
		}
	}
	if onVictim == 0 {
		t.Fatalf("4 streams on 3 workers of 2 slots by least load, none on %s", victim)
	}
	ws[0].Kill()
	killed := time.Now()
	// New requests succeed on the others (how soon is logged, not
	// asserted: the machine may be loaded).
	var firstOK time.Duration
	eventually.True(t, "a request succeeds after the kill", func() bool {
		_, err := chatCall(base, []msg{{"user", "after the kill"}}, 2)
		firstOK = time.Since(killed)
		return err == nil
	})
	failed, finished := 0, 0
	for i := 0; i < streams; i++ {
		s := <-results
		if s.err == nil && (s.worker == victim) != s.errEv {
			t.Errorf("a stream on %s (victim %s): error event %v, [DONE] %v", s.worker, victim, s.errEv, s.done)
		}
		switch {
		case s.err != nil:
			t.Errorf("a stream failed before its 200: %v", s.err)
		case s.errEv:
			failed++
		case s.done:
			finished++
		default:
			t.Error("a stream ended with neither [DONE] nor an error event")
		}
	}
	t.Logf("at the kill %d streams ran on the victim; %d ended with an error event, %d finished; first request after the kill: %v",
		onVictim, failed, finished, firstOK)
	// Which streams failed is checked stream by stream above (exactly
	// the victim's); a count against onVictim would race with the streams
	// that started on the victim after it was read.
	if failed == 0 {
		t.Errorf("no stream failed, the victim ran %d", onVictim)
	}
	// Back: traffic again within 10 s of its return.
	ws[0].Restart(t)
	back := time.Now()
	var before uint64
	for _, s := range workersOf(t, base) {
		if s.URL == victim {
			before = s.Requests
		}
	}
	eventually.True(t, "the returned worker gets traffic", func() bool {
		var wg sync.WaitGroup
		for i := 0; i < 3; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := chatCall(base, []msg{{"user", fmt.Sprintf("after the return %d", i)}}, 2); err != nil {
					t.Errorf("a request after the return: %v", err)
				}
			}()
		}
		wg.Wait()
		var now uint64
		for _, s := range workersOf(t, base) {
			if s.URL == victim {
				now = s.Requests
			}
		}
		return now > before
	})
	t.Logf("the worker got traffic %v after its return", time.Since(back))
}
