package codegen

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestCheckText(t *testing.T) {
	f := func(body string, want error, off int) {
		t.Helper()
		te := CheckText([]byte(body))
		if want == nil {
			if te != nil {
				t.Errorf("CheckText(%q) = %v, want nil", body, te)
			}
			return
		}
		if te == nil || !errors.Is(te, want) || te.Offset != off {
			t.Errorf("CheckText(%q) = %v, want %v at %d", body, te, want, off)
		}
	}
	f(``, nil, 0)
	f(`{"a":"plain"}`, nil, 0)
	f(`{"a":"caf`+"\xc3\xa9"+` `+"\xf0\x9f\x98\x80"+`"}`, nil, 0)
	f(`{"a":"\n\t\"\\\/\u0041\uFFFD"}`, nil, 0)
	f(`{"a":"\ud83d\ude00"}`, nil, 0)
	f(`{"a":"\uD83D\uDE00"}`, nil, 0)
	f(`{"a":"\\ud800"}`, nil, 0)        // an escaped backslash, then text
	f(`{"a":"\\\ud83d\ude00"}`, nil, 0) // an escaped backslash, then a pair
	f(`{"a":"\u12"}`, nil, 0)           // malformed: the decoder's to report
	f(`{"a":"x\`, nil, 0)
	f(`\`, nil, 0)

	f(`{"a":"`+"\xff"+`"}`, ErrInvalidUTF8, 6)
	f(`{"a":"ok `+"\xe2\x82"+`"}`, ErrInvalidUTF8, 9)
	f(`{"a":"`+"\xc0\xaf"+`"}`, ErrInvalidUTF8, 6)
	f(`{"a":"`+"\xed\xa0\x80"+`"}`, ErrInvalidUTF8, 6) // a surrogate, UTF-8 encoded
	f(`{"`+"\x80"+`":1}`, ErrInvalidUTF8, 2)
	f(`{"a":"\ud800"}`, ErrLoneSurrogate, 6)
	f(`{"a":"\uDBFF"}`, ErrLoneSurrogate, 6)
	f(`{"a":"\udc00"}`, ErrLoneSurrogate, 6)
	f(`{"a":"\ude00\ud83d"}`, ErrLoneSurrogate, 6)
	f(`{"a":"\ud83d\u0041"}`, ErrLoneSurrogate, 6)
	f(`{"a":"\ud83d\ud83d\ude00"}`, ErrLoneSurrogate, 6)
	f(`{"a":"\ud83d\n"}`, ErrLoneSurrogate, 6)
	f(`{"a":"\ud83d`, ErrLoneSurrogate, 6)
	f(`{"a":"\\\ud800"}`, ErrLoneSurrogate, 8)
	f(`{"a":"\ud83d\ude00 \udfff"}`, ErrLoneSurrogate, 19)
}

// TestCheckTextMessage: the client's message names the offset and never
// the client's bytes.
func TestCheckTextMessage(t *testing.T) {
	for _, body := range []string{`{"a":"` + "\xff\xfe" + `"}`, `{"a":"\ud800"}`} {
		te := CheckText([]byte(body))
		msg := te.Message()
		if !strings.Contains(msg, "byte offset 6") || strings.ContainsAny(msg, "\xff\xfe") || strings.Contains(msg, `\ud800`) {
			t.Errorf("%q: message %q", body, msg)
		}
	}
}

func TestCheckTextAllocs(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"caf` + "\xc3\xa9" + ` \ud83d\ude00 \n ` + strings.Repeat("text ", 200) + `"}]}`)
	if n := testing.AllocsPerRun(100, func() {
		if CheckText(body) != nil {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Errorf("CheckText allocates %v times per body, want 0", n)
	}
}

func BenchmarkCheckText(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		body := []byte(`{"prompt":"` + strings.Repeat("The quick brown fox \\n caf\u00e9 ", size/24) + `"}`)
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if CheckText(body) != nil {
					b.Fatal("refused")
				}
			}
		})
	}
}
