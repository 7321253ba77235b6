package llamaserver

import (
	"testing"
)

// TestParseEvent reads the events llama-server writes (copied from its
// stream, trimmed).
func TestParseEvent(t *testing.T) {
	p := newParser()
	var ev event
	f := func(in string, check func(*event) bool) {
		t.Helper()
		if err := p.parse([]byte(in), &ev); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if !check(&ev) {
			t.Fatalf("%s: got %+v", in, ev)
		}
	}
	f(`{"index":0,"content":"He\"l\\lo","tokens":[42],"stop":false,"id_slot":0,"tokens_predicted":1,"tokens_evaluated":7}`,
		func(ev *event) bool {
			return len(ev.Tokens) == 1 && ev.Tokens[0] == 42 && !ev.Stop && ev.Predicted == 1 && ev.Evaluated == 7 &&
				string(ev.content(nil)) == `He"l\lo`
		})
	// Escapes of every kind, a surrogate pair, and content appended to
	// what came before.
	f(`{"content":"a\n\t\u00e9\ud83d\ude00\/","tokens":[1]}`, func(ev *event) bool {
		return string(ev.content([]byte("x"))) == "xa\n\t\u00e9\U0001F600/"
	})
	f(`{"index":0,"content":"","tokens":[],"id_slot":0,"stop":true,"model":"m","tokens_predicted":9,"tokens_evaluated":7,`+
		`"generation_settings":{"n_predict":9,"samplers":["top_k","top_p"],"grammar":"","lora":[],"x":null,"y":-1.5e-3},`+
		`"prompt":"<|im_start|>user","has_new_line":false,"truncated":false,"stop_type":"limit","stopping_word":"","tokens_cached":16,`+
		`"timings":{"cache_n":3,"prompt_n":4,"predicted_per_second":123.4}}`,
		func(ev *event) bool {
			return len(ev.Tokens) == 0 && ev.Stop && ev.StopType == stopLimit && ev.Timings.CacheN == 3 && ev.Predicted == 9
		})
	f(`{"index":0,"content":"a","tokens":[5],"stop":false,"completion_probabilities":[{"id":5,"token":"a","bytes":[97],"logprob":-0.25,`+
		`"top_logprobs":[{"id":5,"token":"a","bytes":[97],"logprob":-0.25},{"id":6,"token":"b","bytes":[98],"logprob":-1.5}]}]}`,
		func(ev *event) bool {
			return len(ev.Probs.logprobs) == 1 && ev.Probs.logprobs[0] == -0.25 && len(ev.Probs.top) == 1 && len(ev.Probs.top[0]) == 2 &&
				ev.Probs.top[0][1].TokenID == 6 && ev.Probs.top[0][1].Logprob == -1.5
		})
	f(`{"error":{"code":500,"message":"slot unavailable","type":"server_error"}}`,
		func(ev *event) bool {
			return ev.Error.has && ev.Error.code == 500 && string(ev.Error.msg) == "slot unavailable"
		})
	for _, bad := range []string{``, `{`, `{"tokens":[1,}`, `{"stop":tru}`, `[1]`, `{"a" 1}`, `null`, `7`, `{"tokens":[1]} x`,
		`{"completion_probabilities":[{"logprob":"x"}]}`} {
		if err := p.parse([]byte(bad), &ev); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestParseEventAllocs: parsing a token event allocates nothing once the
// event's slices have grown.
func TestParseEventAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := newParser()
	var ev event
	in := []byte(`{"index":0,"content":"a","tokens":[5],"stop":false,"id_slot":0,"tokens_predicted":3,"tokens_evaluated":9,` +
		`"completion_probabilities":[{"id":5,"token":"a","bytes":[97],"logprob":-0.25,"top_logprobs":[{"id":5,"token":"a","bytes":[97],"logprob":-0.25}]}]}`)
	_ = p.parse(in, &ev)
	if n := testing.AllocsPerRun(1000, func() { _ = p.parse(in, &ev) }); n != 0 {
		t.Fatalf("%.1f allocations per event", n)
	}
}

func BenchmarkParseEvent(b *testing.B) {
	p := newParser()
	var ev event
	in := []byte(`{"index":0,"content":" the","tokens":[1234],"stop":false,"id_slot":0,"tokens_predicted":17,"tokens_evaluated":42}`)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		_ = p.parse(in, &ev)
	}
}

func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(`{"tokens":[1,2],"stop":true,"timings":{"cache_n":3}}`))
	f.Add([]byte(`{"completion_probabilities":[{"id":1,"logprob":-1,"top_logprobs":[{"id":2,"logprob":-2}]}]}`))
	p := newParser()
	f.Fuzz(func(t *testing.T, b []byte) {
		var ev event
		_ = p.parse(b, &ev)
	})
}
