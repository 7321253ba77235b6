package sim

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// TestPromptCacheExact: a prompt tokenized segment by segment through the
// cache, cold and then from it, gives the ids tiktoken-go gives the whole
// prompt, for ASCII and other text, contents that end in spaces, newlines
// or punctuation, and contents that hold the cut's own text.
func TestPromptCacheExact(t *testing.T) {
	v := testVocab(t)
	contents := []string{
		"You are terse.", "hi", "", " ", "  ", "\n", "\n\n", "a  ", "trailing\n\n", "x|>", "<|", "|>\n",
		"<|im_end|>\n<|im_start|>", "end<|im_end|>\n<<", "/", "//\n", "123", "it's", "Ünïcödé 日本語 text",
		"emoji 😀\n", strings.Repeat("The quick brown fox jumps over the lazy dog. ", 12),
	}
	roles := []string{"system", "user", "assistant", "user"}
	for i, a := range contents {
		for j, b := range contents {
			msgs := []engine.Message{{Role: roles[i%4], Content: a}, {Role: roles[(j+1)%4], Content: b}, {Role: "user", Content: b + a}}
			text := RenderChatML(msgs, nil)
			want := toInt32(oldEncode(v, text))
			for pass := 0; pass < 3; pass++ { // miss, miss (stored), hit
				if got := v.encodeChatML(msgs, nil, promptGen); !slices.Equal(got, want) {
					t.Fatalf("%q pass %d:\n got %v\nwant %v", text, pass, got, want)
				}
			}
		}
	}
}

// TestPromptCacheOnceNoAlloc: a segment seen once is not stored, so a
// stream of new prompts costs the cache no allocation; seen twice, it is.
func TestPromptCacheOnceNoAlloc(t *testing.T) {
	v := testVocab(t)
	c := newPromptCache()
	w := *v
	w.prompts = c
	dst := make([]int, 0, 256)
	segs := make([]string, 101) // AllocsPerRun's warm-up call, then 100
	for i := range segs {
		segs[i] = "<|im_start|>user\na segment the cache has not met, " + strconv.Itoa(i) + "<|im_end|>\n"
	}
	k := 0
	if a := testing.AllocsPerRun(100, func() { dst = w.appendSegment(dst[:0], segs[k]); k++ }); a != 0 {
		t.Errorf("a first sighting allocates %v times", a)
	}
	seg := segs[0]
	w.appendSegment(dst[:0], seg)
	w.appendSegment(dst[:0], seg)
	if e := c.slots[c.index(seg)].Load(); e == nil || e.text != seg {
		t.Fatal("a segment seen twice is not cached")
	}
	if a := testing.AllocsPerRun(100, func() { dst = w.appendSegment(dst[:0], seg) }); a != 0 {
		t.Errorf("a hit allocates %v times", a)
	}
}

// BenchmarkEncodeChatML: the benchmark's chat prompt (a system turn and a
// 108-word user turn), tokenized whole (as before the cache) and through
// the cache, warm.
func BenchmarkEncodeChatML(b *testing.B) {
	v := testVocab(b)
	msgs := []engine.Message{{Role: "system", Content: "You are terse."},
		{Role: "user", Content: strings.Repeat("The quick brown fox jumps over the lazy dog. ", 12)}}
	text := RenderChatML(msgs, nil)
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = v.encode(text)
		}
	})
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = v.encodeChatML(msgs, nil, promptGen)
		}
	})
}

func toInt32(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}
