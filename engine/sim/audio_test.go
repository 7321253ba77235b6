package sim

import (
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// tone returns seconds of 24 kHz PCM16 audio whose samples depend on seed.
func tone(seconds float64, seed int) []byte {
	n := int(seconds * 24000)
	b := make([]byte, 2*n)
	for i := 0; i < n; i++ {
		v := int16((i*seed*31 + i/7) % 20000)
		b[2*i], b[2*i+1] = byte(v), byte(v>>8)
	}
	return b
}

func transcribe(t *testing.T, e *Engine, pcm []byte) (*engine.Result, *recFormatter) {
	t.Helper()
	req := &engine.Request{Audio: engine.Audio{PCM: pcm, SampleRate: 24000}}
	res, f, _ := run(t, e, req, true)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	return res, f
}

func TestTranscription(t *testing.T) {
	e := newEngine(t, nil)
	res, f := transcribe(t, e, tone(2.5, 3))
	c := res.Choices[0]
	// 2.5 s: 10 transcript tokens, 25 audio tokens in the prompt.
	if len(c.TokenIDs) != 2.5*TranscriptTokensPerSecond || res.Usage.PromptTokens != 2.5*AudioTokensPerSecond {
		t.Fatalf("tokens: %d transcript, %d audio", len(c.TokenIDs), res.Usage.PromptTokens)
	}
	if c.FinishReason != engine.FinishStop || strings.TrimSpace(c.Text) == "" {
		t.Fatalf("transcript %q, finish %s", c.Text, c.FinishReason)
	}
	if len(f.deltas) < 2 || f.text(0, engine.DeltaText) != c.Text {
		t.Fatalf("streamed in %d deltas %q, want the transcript %q over several steps", len(f.deltas), f.text(0, engine.DeltaText), c.Text)
	}
	// The same audio is heard the same way; other audio differently.
	again, _ := transcribe(t, e, tone(2.5, 3))
	other, _ := transcribe(t, e, tone(2.5, 5))
	if again.Choices[0].Text != c.Text || other.Choices[0].Text == c.Text {
		t.Fatalf("transcripts: %q, again %q, other audio %q", c.Text, again.Choices[0].Text, other.Choices[0].Text)
	}
	// A very short clip still gets a word.
	if short, _ := transcribe(t, e, tone(0.05, 1)); len(short.Choices[0].TokenIDs) != 1 {
		t.Fatalf("50 ms: %d tokens", len(short.Choices[0].TokenIDs))
	}
}

func TestTranscriptionRefused(t *testing.T) {
	e := newEngine(t, nil)
	for _, req := range []*engine.Request{
		{Audio: engine.Audio{PCM: tone(1, 1)}},
		{Audio: engine.Audio{PCM: tone(1, 1), SampleRate: 24000}, Prompt: "and text"},
	} {
		err := e.Prepare(req)
		if ee := engine.AsError(err); err == nil || ee.Kind != engine.KindInvalid || ee.Param != "audio" {
			t.Errorf("%+v: got %v", req.Audio.SampleRate, err)
		}
	}
}
