package remote

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/internal/eventually"
)

// rankedFake is a fakeClient that is one data-parallel rank of an engine
// (Ranked), as each rank of vLLM's engine core is.
type rankedFake struct {
	*fakeClient
	rank int
}

func (r rankedFake) Rank() int { return r.rank }

func init() {
	Register("fakerank", func(u string, _ DialOptions) (Client, error) {
		fakeMu.Lock()
		defer fakeMu.Unlock()
		c := fakeClients[u]
		if c == nil {
			return nil, errors.New("no fake worker " + u)
		}
		return rankedFake{c, int(u[len(u)-1] - '0')}, nil
	})
}

// newRanked makes fake workers of ranks 0..n-1 and an engine over them.
func newRanked(tb testing.TB, n int) (*Engine, []*fakeClient) {
	tb.Helper()
	var urls []string
	var fs []*fakeClient
	for i := range n {
		u := "fakerank://r" + time.Now().Format("150405.000000000") + "#" + string(rune('0'+i))
		f := &fakeClient{url: u, ctx: 256, gens: make(chan *fakeCall, 64)}
		fakeMu.Lock()
		fakeClients[u] = f
		fakeMu.Unlock()
		urls, fs = append(urls, u), append(fs, f)
	}
	e, err := New(Config{Workers: urls, Tokenizer: byteTok{}, HealthInterval: 20 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	return e, fs
}

func pinned(rank int) *engine.Request {
	req := chat("hi", 5)
	req.VLLM = &engine.VLLMExtensions{PinRank: true, DataParallelRank: rank}
	return req
}

// TestPinnedRank: a request pinned to a data-parallel rank (vLLM's
// X-data-parallel-rank) runs on that rank's worker every time, whatever
// the router would pick; a rank with no worker up is unavailable, naming
// the rank; a negative one is a 400.
func TestPinnedRank(t *testing.T) {
	e, fs := newRanked(t, 2)
	for i := range 6 {
		rank := i % 2
		rec, _, c := start(t, e, fs[rank], pinned(rank))
		c.tokens(0, ids("ok")...)
		c.end(&End{})
		if res := rec.wait(t); res.Err != nil || res.Choices[0].Text != "ok" {
			t.Fatalf("rank %d: %v %+v", rank, res.Err, res.Choices)
		}
	}
	for rank, f := range fs {
		if n := len(f.calls); n != 3 {
			t.Errorf("rank %d's worker ran %d requests, want 3", rank, n)
		}
	}

	startPrepared := func(req *engine.Request) (engine.Session, error) {
		rec := newRecorder()
		req.Formatter = rec
		return e.Start(req, rec)
	}
	req := pinned(2)
	if err := e.Prepare(req); err != nil {
		t.Fatal(err) // ranks attach while the engine runs: not known to be out of range
	}
	_, err := startPrepared(req)
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Kind != engine.KindClosed || !strings.Contains(ee.Message, "data-parallel rank 2") {
		t.Fatalf("rank 2: %v", err)
	}

	fs[1].down.Store(true)
	if _, err := startPrepared(mustPrepare(t, e, pinned(1))); err == nil {
		// The worker's refusal is retried on another worker of rank 1
		// only: there is none.
		t.Fatal("a request pinned to a rank whose worker refuses ran")
	}
	if len(fs[0].calls) != 3 {
		t.Fatalf("a request pinned to rank 1 went to rank 0 (%d calls)", len(fs[0].calls))
	}

	err = e.Prepare(pinned(-1))
	if !errors.As(err, &ee) || ee.Kind != engine.KindInvalid || ee.Param != "X-data-parallel-rank" {
		t.Fatalf("rank -1: %v", err)
	}
}

// TestPinnedRankWithoutRanks: workers without ranks are rank 0 of 1, as
// vLLM with one engine: rank 0 runs, rank 1 is a 400 in vLLM's words.
func TestPinnedRankWithoutRanks(t *testing.T) {
	e, f := newFake(t, Config{}, false)
	rec, _, c := start(t, e, f, pinned(0))
	c.end(&End{})
	if res := rec.wait(t); res.Err != nil {
		t.Fatal(res.Err)
	}
	err := e.Prepare(pinned(1))
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Kind != engine.KindInvalid || ee.Message != "data_parallel_rank 1 is out of range [0, 1)." {
		t.Fatalf("rank 1: %v", err)
	}
}

func mustPrepare(tb testing.TB, e *Engine, req *engine.Request) *engine.Request {
	tb.Helper()
	if err := e.Prepare(req); err != nil {
		tb.Fatal(err)
	}
	return req
}

// countedFake is a rank of an engine that says how many ranks it has
// (RankCounted), as a vllm-core engine's registration does.
type countedFake struct {
	rankedFake
	ranks int
}

func (c countedFake) Ranks() int { return c.ranks }

// fakePool is a Pool whose members the test attaches.
type fakePool struct{ join func(string, Client) }

func (p *fakePool) Watch(join func(string, Client), _ func(Client)) { p.join = join }
func (p *fakePool) Close() error                                    { return nil }

var fakePools = map[string]*fakePool{}

func init() {
	RegisterPool("fakepool", func(u string, _ DialOptions) (Pool, error) {
		fakeMu.Lock()
		defer fakeMu.Unlock()
		p := &fakePool{}
		fakePools[u] = p
		return p, nil
	})
}

// TestPinnedRankRange: ranks that attach say how many the engine has: a
// rank past them is vLLM's 400 naming the range; one in range whose rank
// has not attached is a 503 naming it; before any rank attached the range
// is not known, and every request is a 503 naming the address engines
// attach to.
func TestPinnedRankRange(t *testing.T) {
	u := "fakepool://p" + time.Now().Format("150405.000000000")
	e, err := New(Config{Workers: []string{u}, Tokenizer: byteTok{}, HealthInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	var ee *engine.Error
	unavailable := func(rank int) {
		t.Helper()
		req := mustPrepare(t, e, pinned(rank))
		rec := newRecorder()
		req.Formatter = rec
		_, err := e.Start(req, rec)
		if !errors.As(err, &ee) || ee.Kind != engine.KindClosed || !strings.Contains(ee.Message, "data-parallel rank "+string(rune('0'+rank))) {
			t.Fatalf("rank %d: %v, want unavailable naming the rank", rank, err)
		}
	}
	// Nothing attached: any rank may come; the error says where.
	err = e.Prepare(pinned(3))
	if !errors.As(err, &ee) || ee.Kind != engine.KindClosed || !strings.Contains(ee.Message, "no engine has attached to "+u) {
		t.Fatalf("rank 3, nothing attached: %v", err)
	}

	f := &fakeClient{url: u + "#0", ctx: 256, gens: make(chan *fakeCall, 64)}
	fakeMu.Lock()
	join := fakePools[u].join
	fakeMu.Unlock()
	join(f.url, countedFake{rankedFake{f, 0}, 2})
	eventually.True(t, "rank 0 healthy", func() bool { ws := e.Workers(); return len(ws) == 1 && ws[0].Healthy() })

	err = e.Prepare(pinned(2))
	if !errors.As(err, &ee) || ee.Kind != engine.KindInvalid || ee.Param != "X-data-parallel-rank" ||
		ee.Message != "data_parallel_rank 2 is out of range [0, 2)." {
		t.Fatalf("rank 2 of 2: %v", err)
	}
	unavailable(1)
	rec, _, c := start(t, e, f, pinned(0))
	c.tokens(0, ids("ok")...)
	c.end(&End{})
	if res := rec.wait(t); res.Err != nil || res.Choices[0].Text != "ok" {
		t.Fatalf("rank 0: %v %+v", res.Err, res.Choices)
	}
}
