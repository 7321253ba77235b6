package sim

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

func testVocab(t testing.TB) *vocab {
	t.Helper()
	v, _, err := loadShared()
	if err != nil {
		t.Fatal(err)
	}
	if v.ranks == nil {
		t.Fatal("no rank table: fast path disabled")
	}
	return v
}

// checkSame fails when the fast path's ids for ASCII s differ from
// tiktoken-go's.
func checkSame(t testing.TB, v *vocab, s string) {
	t.Helper()
	if !isASCII(s) {
		t.Fatalf("%q is not ASCII", s)
	}
	want := v.encodeAppendSlow(nil, s)
	got := v.ranks.appendASCII(nil, s)
	if !slices.Equal(got, want) {
		t.Errorf("%q:\n got %v %q\nwant %v %q", s, got, pieces(v, got), want, pieces(v, want))
	}
	if enc := v.encode(s); !slices.Equal(enc, want) || (enc == nil) != (s == "") {
		t.Errorf("%q: encode gives %v, want %v", s, enc, want)
	}
}

func pieces(v *vocab, ids []int) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = v.text(id)
	}
	return out
}

// TestRankTable checks that strs (decoded from the codec) is the exact
// inverse of the codec's vocabulary, so that the rank table holds the same
// (token, rank) pairs as the map tiktoken-go merges with.
func TestRankTable(t *testing.T) {
	v := testVocab(t)
	n := 0
	for id := range v.strs.len() {
		s := v.strs.at(id)
		if s == "" {
			continue
		}
		n++
		if want, err := v.codec.Decode([]uint{uint(id)}); err != nil || want != s {
			t.Fatalf("token %d: table has %q, the codec decodes %q (%v)", id, s, want, err)
		}
		if r, ok := v.ranks.rank(s); !ok || int(r) != id {
			t.Fatalf("rank(%q) = %d %v, want %d", s, r, ok, id)
		}
	}
	vocabLen := reflect.ValueOf(v.codec).Elem().FieldByName("vocabulary").Len()
	if n != vocabLen {
		t.Fatalf("%d tokens decoded, the codec's vocabulary has %d", n, vocabLen)
	}
	if _, ok := v.ranks.rank("<|endoftext|>"); ok {
		t.Fatal("special token in the rank table")
	}
}

var trickyASCII = []string{
	"hello", "Hello world", "HelloWorld", "ABCdef", "ABC", "ABC def", "aBC", "iPhone", "NASA's", "McDonald's",
	"I'LL", "I'll", "i'Ll", "don't", "DON'T", "we're", "WE'RE", "they've", "THEY'VE", "I'm", "I'M", "he'd", "HE'D",
	"it's", "IT'S", "can'T", "'s", "'S", "'", "''", "'''s", "x'", "x'y", "x'l", "x'lL", "x'r", "x're", "x'v", "x'vee",
	"rock'n'roll", "O'Neil", "o'clock", "'tis", "y'all", "ma'am", "Ain't", "'ll'll", "a's's", "A'S'S",
	"12345678", "1", "12", "123", "1234", "3.14159", "1,000,000", "v2", "x86_64", "a1b2c3", "007bond", "A1", " 42", "  42",
	"...!!", "!!!", "a/b", "a//b", "http://example.com/path?q=1&r=2", "//", "/", "!/", "!\n/", "!\r\n/x", ".\n\n/\n", " .", "  .", " /",
	"\n\n  \t x", "\n", "\r\n", "\n\n\n", " \n", "\n ", "a\n", "a \n b", "a  \n  b", "\t\n\t", "\r", "\r\r\n\n", "x\r\ny",
	"trailing spaces   ", "trailing space ", " ", "  ", "   ", "\t", "\t\t", " \t", "\t ", "a\tb", "a\t\tb", "a \tb", "a\t b",
	"\v", "\f", "a\vb", "a\fb", "\va", "\fa", "a \v b", "\v\n", " \v\f\r\n\t ",
	",hello", ".Hello", "(HELLO)", "!important", "#define X 1", "$var", "@user", "_private", "__init__", "-flag", "--long-flag",
	"\"quoted\"", "'single'", "`code`", "[a]", "{\"k\": \"v\"}", "<|im_start|>user", "<|endoftext|>", "<|endofprompt|>",
	"a.b.c", "e.g.", "U.S.A.", "Mr. Smith", "foo()", "foo(bar, baz);", "x = y + z * 2", "a==b", "a != b", "i++", "--", "->", "=>",
	"\x00", "\x01a", "a\x1fb", "\x1b[31mred\x1b[0m", "\x7f", "a\x7fb", "\x7fabc", " \x7f", ";\x7f", "\x7f\x7f", "A\x7f's", "1\x7f2",
	"\x7f ", "\n\x7f\n", "\x00\x00\x00",
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	strings.Repeat("ab", 60), strings.Repeat("xyzzy", 30), strings.Repeat(" ", 200), strings.Repeat("\n", 130),
	strings.Repeat("!", 150), strings.Repeat("=-", 70), strings.Repeat("Supercalifragilisticexpialidocious", 4),
	strings.Repeat("a", 95), strings.Repeat("a", 96), strings.Repeat("a", 97), strings.Repeat("q", 1000),
	"The quick brown fox jumps over the lazy dog.", "It's 5 o'clock; they're LATE!! (again...)",
	"func main() {\n\tfmt.Println(\"hi\")\n}\n", "    indented code\n        more\n", "line1\n\nline2\n\n\n",
}

func TestPretokenizeTable(t *testing.T) {
	v := testVocab(t)
	for _, s := range trickyASCII {
		checkSame(t, v, s)
	}
}

// chatMLPrompts are prompts rendered as the tests and the integration
// tests (integration/) render them.
func chatMLPrompts() []string {
	tools := []engine.Tool{
		{Name: "lookup_time", Parameters: []byte(`{"type":"object","properties":{"tz":{"type":"string"}},"required":["tz"]}`)},
		{Name: "get_weather", Description: "Weather", Parameters: []byte(weatherSchema)},
	}
	var out []string
	for _, text := range []string{"hello", "What is it like outside?", "Say something.", "", "x", "Tell me a story about the sea.\n\nMake it short."} {
		req := chatReq(text, 0)
		out = append(out, RenderChatML(req.Messages, nil), RenderChatML(req.Messages, tools))
	}
	out = append(out,
		RenderChatML([]engine.Message{
			{Role: "developer", Content: "Be brief."},
			{Role: "user", Content: "Weather in Paris?"},
			{Role: "assistant", ToolCalls: []engine.ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{"location":"Paris"}`}}},
			{Role: "tool", ToolCallID: "c1", Content: "18C"},
			{Role: "tool", ToolCallID: "c2", Content: "sunny"},
		}, []engine.Tool{{Name: "get_weather", Description: "Weather", Parameters: []byte(`{"type":"object"}`)}}),
		RenderChatML([]engine.Message{{Role: "user", Content: "hi"}}, nil),
		RenderChatML([]engine.Message{{Role: "user", Content: englishPrompt}}, nil),
	)
	return out
}

func TestPretokenizeChatML(t *testing.T) {
	v := testVocab(t)
	for _, s := range chatMLPrompts() {
		checkSame(t, v, s)
	}
	checkSame(t, v, corpusText)
	for _, s := range strings.SplitAfter(corpusText, ". ") {
		checkSame(t, v, s)
	}
	checkSame(t, v, weatherSchema)
}

// TestPretokenizeExhaustive compares every string of up to 4 chars over an
// alphabet with one char of each class that matters (and the chars that
// the pattern names).
func TestPretokenizeExhaustive(t *testing.T) {
	v := testVocab(t)
	alpha := "aAsL1 \n\r\t\v'/.\x00\x7f"
	maxLen := 4
	if testing.Short() {
		maxLen = 3
	}
	buf := make([]byte, 0, maxLen)
	var rec func()
	rec = func() {
		if len(buf) > 0 {
			checkSame(t, v, string(buf))
			if t.Failed() {
				t.FailNow()
			}
		}
		if len(buf) == maxLen {
			return
		}
		for i := range len(alpha) {
			buf = append(buf, alpha[i])
			rec()
			buf = buf[:len(buf)-1]
		}
	}
	rec()
}

// TestPretokenizeRandom compares random ASCII strings biased towards the
// pattern's interesting chars.
func TestPretokenizeRandom(t *testing.T) {
	v := testVocab(t)
	rng := rand.New(rand.NewPCG(1, 2))
	alpha := "aeiouAEIOUstlrvmdSTLRVMD0123456789      \n\r\t\v\f''''//..,!?-_()\"\x00\x1b\x7f"
	n := 3000
	if testing.Short() {
		n = 300
	}
	buf := make([]byte, 0, 300)
	for range n {
		buf = buf[:0]
		for range rng.IntN(300) {
			if rng.IntN(8) == 0 {
				buf = append(buf, byte(rng.IntN(128)))
			} else {
				buf = append(buf, alpha[rng.IntN(len(alpha))])
			}
		}
		checkSame(t, v, string(buf))
		if t.Failed() {
			t.FailNow()
		}
	}
}

// TestEncodeNonASCII checks that non-ASCII text takes the library's path.
func TestEncodeNonASCII(t *testing.T) {
	v := testVocab(t)
	for _, s := range []string{"héllo wörld", "日本語のテキスト", "emoji 😀!", "a\u00a0b", "x\u0085y", "\xff\xfe", "Ǆungla", "Ⅻ 12"} {
		if isASCII(s) {
			t.Fatalf("%q is ASCII", s)
		}
		if got, want := v.encode(s), v.encodeAppendSlow(nil, s); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", s, got, want)
		}
	}
	if v.encode("") != nil {
		t.Error("encode(\"\") != nil")
	}
}

func TestIsASCII(t *testing.T) {
	for i := range 20 {
		for j := 0; j < i; j++ {
			b := []byte(strings.Repeat("a", i))
			if !isASCII(string(b)) {
				t.Fatal(i)
			}
			b[j] = 0x80
			if isASCII(string(b)) {
				t.Fatal(i, j)
			}
		}
	}
}

func TestEncodeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	v := testVocab(t)
	dst := make([]int, 0, 4096)
	long := strings.Repeat("x", 300) + " " + strings.Repeat("ab", 100)
	for _, s := range []string{englishPrompt, chatMLPrompts()[1], long} {
		if a := testing.AllocsPerRun(50, func() { dst = v.encodeAppend(dst[:0], s) }); a != 0 {
			t.Errorf("encodeAppend: %v allocs per run, want 0 (%.20q)", a, s)
		}
		if a := testing.AllocsPerRun(50, func() { _ = v.encode(s) }); a != 1 {
			t.Errorf("encode: %v allocs per run, want 1 (%.20q)", a, s)
		}
	}
}

func FuzzPretokenizeASCII(f *testing.F) {
	for _, s := range trickyASCII {
		f.Add(s)
	}
	for _, s := range chatMLPrompts() {
		f.Add(s)
	}
	f.Add("I'LL don't 12345678 ...!! a/b\n\n  \t x  ")
	f.Add("\x7f\v\f\r\n/'S")
	v := testVocab(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !isASCII(s) {
			t.Skip()
		}
		want := v.encodeAppendSlow(nil, s)
		got := v.ranks.appendASCII(nil, s)
		if !slices.Equal(got, want) {
			t.Fatalf("%q:\n got %v %q\nwant %v %q", s, got, pieces(v, got), want, pieces(v, want))
		}
	})
}

// englishPrompt is a 128-word English prompt.
var englishPrompt = func() string {
	words := strings.Fields(corpusText)
	return strings.Join(words[:128], " ")
}()

func BenchmarkEncodePrompt(b *testing.B) {
	v := testVocab(b)
	prompt := englishPrompt
	b.Logf("%d words, %d bytes, %d tokens", len(strings.Fields(prompt)), len(prompt), len(v.encode(prompt)))
	b.Run("tiktoken", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = oldEncode(v, prompt)
		}
	})
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = v.encode(prompt)
		}
	})
	b.Run("encodeAppend", func(b *testing.B) {
		b.ReportAllocs()
		dst := make([]int, 0, 1024)
		for b.Loop() {
			dst = v.encodeAppend(dst[:0], prompt)
		}
	})
	b.Run("chatml/tiktoken", func(b *testing.B) {
		b.ReportAllocs()
		s := RenderChatML(chatReq(prompt, 0).Messages, nil)
		for b.Loop() {
			_ = oldEncode(v, s)
		}
	})
	b.Run("chatml/encode", func(b *testing.B) {
		b.ReportAllocs()
		s := RenderChatML(chatReq(prompt, 0).Messages, nil)
		for b.Loop() {
			_ = v.encode(s)
		}
	})
}

// oldEncode is encode as it was before the fast path.
func oldEncode(v *vocab, text string) []int {
	ids, _, err := v.codec.Encode(text)
	if err != nil {
		return nil
	}
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}
