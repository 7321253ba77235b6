package remote

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vajra-go/vajra/internal/eventually"
)

// tokSource is a fake worker that tokenizes for the engine (as
// llama-server's /tokenize does): byteTok's ids, or unreachable while
// down; it counts its WorkerEncode calls.
type tokSource struct {
	*fakeClient
	vocab   int
	encodes atomic.Int64
}

func (s *tokSource) WorkerTokenizer(context.Context) (Tokenizer, error) { return byteTok{}, nil }

func (s *tokSource) WorkerEncode(_ context.Context, dst []int32, text string) ([]int32, error) {
	s.encodes.Add(1)
	if s.down.Load() {
		return dst, &WorkerError{Worker: s.url, Retryable: true, Message: "unreachable", Err: errors.New("refused")}
	}
	return byteTok{}.Encode(dst, text), nil
}

func (s *tokSource) Info(ctx context.Context) (*Info, error) {
	info, _ := s.fakeClient.Info(ctx)
	info.VocabSize = s.vocab
	return info, nil
}

var (
	tokSrcMu sync.Mutex
	tokSrcs  = map[string]*tokSource{}
)

func init() {
	Register("faketok", func(u string, _ DialOptions) (Client, error) {
		tokSrcMu.Lock()
		defer tokSrcMu.Unlock()
		return tokSrcs[u], nil
	})
}

func newTokSource(name string, vocab int, down bool) (*tokSource, string) {
	u := "faketok://" + name + time.Now().Format("150405.000000000")
	s := &tokSource{fakeClient: &fakeClient{url: u, ctx: 256, gens: make(chan *fakeCall, 8)}, vocab: vocab}
	s.down.Store(down)
	tokSrcMu.Lock()
	tokSrcs[u] = s
	tokSrcMu.Unlock()
	return s, u
}

// TestWorkerTokenizerFailover: with no tokenizer configured the engine
// takes the vocabulary of the worker that answered first and encodes on
// it; once it is down, on another healthy worker of the same vocabulary
// (never on one of another vocabulary), and the dead one is marked down.
func TestWorkerTokenizerFailover(t *testing.T) {
	first, u1 := newTokSource("first", 258, false)
	other, u2 := newTokSource("other", 300, false)
	second, u3 := newTokSource("second", 258, true)
	e, err := New(Config{Workers: []string{u1, u2, u3}, HealthInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	eventually.True(t, "the engine healthy", func() bool { return e.Stats().Healthy })
	if got := e.Tokenize("hi"); !slices.Equal(got, []int{tokBOS, 'h', 'i'}) || first.encodes.Load() != 1 {
		t.Fatalf("tokenize %v; %d encodes on the first worker", got, first.encodes.Load())
	}
	second.down.Store(false)
	eventually.True(t, "the second worker healthy", func() bool { return e.Workers()[2].Healthy() })
	first.down.Store(true)
	for range 3 {
		if got := e.Tokenize("hi"); !slices.Equal(got, []int{tokBOS, 'h', 'i'}) {
			t.Fatalf("tokenize %v with the first worker down", got)
		}
	}
	if second.encodes.Load() != 3 || other.encodes.Load() != 0 || e.Workers()[0].Healthy() {
		t.Fatalf("encodes: second %d, other vocabulary %d; first healthy %v",
			second.encodes.Load(), other.encodes.Load(), e.Workers()[0].Healthy())
	}
	second.down.Store(true)
	if got := e.Tokenize("hi"); got != nil {
		t.Fatalf("tokenize %v with no worker of the vocabulary up", got)
	}
}
