package openai

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/mailru/easyjson/jwriter"

	"github.com/vajra-go/vajra/engine"
)

// toEngineBoth decodes the chat body {messages, extra} and the completions
// body {prompt, extra} and validates each, returning both samplings and
// both errors.
func toEngineBoth(t *testing.T, extra string) (chat, comp engine.Sampling, chatErr, compErr *ParamError) {
	t.Helper()
	var cr ChatRequest
	if err := DecodeChatRequest([]byte(`{"messages":[{"role":"user","content":"x"}]`+extra+`}`), &cr); err != nil {
		t.Fatalf("chat %s: decode: %v", extra, err)
	}
	var q engine.Request
	chatErr = cr.ToEngine(&q)
	chat = q.Sampling
	var pr CompletionRequest
	if err := DecodeCompletionRequest([]byte(`{"prompt":"x"`+extra+`}`), &pr); err != nil {
		t.Fatalf("completions %s: decode: %v", extra, err)
	}
	q = engine.Request{}
	compErr = pr.ToEngine(&q)
	comp = q.Sampling
	return chat, comp, chatErr, compErr
}

func TestPenaltiesToEngine(t *testing.T) {
	f := func(extra string, want engine.Sampling) {
		t.Helper()
		chat, comp, ce, pe := toEngineBoth(t, extra)
		if ce != nil || pe != nil {
			t.Fatalf("%s: errors %v / %v", extra, ce, pe)
		}
		got := func(s engine.Sampling) engine.Sampling {
			return engine.Sampling{FrequencyPenalty: s.FrequencyPenalty, PresencePenalty: s.PresencePenalty,
				RepetitionPenalty: s.RepetitionPenalty, MinP: s.MinP, LogitBias: s.LogitBias}
		}
		if !reflect.DeepEqual(got(chat), want) {
			t.Errorf("chat %s:\n got %+v\nwant %+v", extra, got(chat), want)
		}
		if !reflect.DeepEqual(got(comp), want) {
			t.Errorf("completions %s:\n got %+v\nwant %+v", extra, got(comp), want)
		}
	}
	f(``, engine.Sampling{})
	f(`,"frequency_penalty":null,"presence_penalty":null,"repetition_penalty":null,"min_p":null,"logit_bias":null`, engine.Sampling{})
	f(`,"logit_bias":{}`, engine.Sampling{})
	f(`,"frequency_penalty":-2,"presence_penalty":2,"repetition_penalty":1.3,"min_p":1`,
		engine.Sampling{FrequencyPenalty: -2, PresencePenalty: 2, RepetitionPenalty: 1.3, MinP: 1})
	f(`,"frequency_penalty":0.5,"min_p":0`, engine.Sampling{FrequencyPenalty: 0.5})
	// Sorted by id; a repeated id ("7" and "07") keeps its last value, as
	// a Python dict does; integer and fractional biases.
	f(`,"logit_bias":{"50256":-100,"7":1,"0":100,"07":-2.5,"+3":0}`, engine.Sampling{LogitBias: []engine.TokenBias{
		{TokenID: 0, Bias: 100}, {TokenID: 3, Bias: 0}, {TokenID: 7, Bias: -2.5}, {TokenID: 50256, Bias: -100}}})
	var many strings.Builder
	wantMany := make([]engine.TokenBias, MaxLogitBias)
	many.WriteString(`,"logit_bias":{`)
	for i := range MaxLogitBias {
		if i > 0 {
			many.WriteByte(',')
		}
		id := MaxLogitBias - 1 - i
		many.WriteString(`"` + strconv.Itoa(id) + `":1`)
		wantMany[id] = engine.TokenBias{TokenID: id, Bias: 1}
	}
	many.WriteString(`}`)
	f(many.String(), engine.Sampling{LogitBias: wantMany})
}

func TestPenaltiesValidation(t *testing.T) {
	f := func(extra, param string) {
		t.Helper()
		_, _, ce, pe := toEngineBoth(t, extra)
		for name, err := range map[string]*ParamError{"chat": ce, "completions": pe} {
			if err == nil {
				t.Errorf("%s %s: no error, want %q", name, extra, param)
				continue
			}
			if err.Param != param || err.Code != CodeInvalidValue || err.Status() != 400 {
				t.Errorf("%s %s: got %q %q %d (%s), want %q %q 400", name, extra, err.Param, err.Code, err.Status(), err.Message, param, CodeInvalidValue)
			}
			if strings.Contains(err.Message, "SECRET\"") {
				t.Errorf("%s %s: message echoes the key unescaped: %s", name, extra, err.Message)
			}
		}
	}
	f(`,"frequency_penalty":2.01`, "frequency_penalty")
	f(`,"presence_penalty":-2.5`, "presence_penalty")
	f(`,"repetition_penalty":0`, "repetition_penalty")
	f(`,"repetition_penalty":-1`, "repetition_penalty")
	f(`,"min_p":-0.1`, "min_p")
	f(`,"min_p":1.5`, "min_p")
	f(`,"logit_bias":{"abc":1}`, "logit_bias")
	f(`,"logit_bias":{"1.5":1}`, "logit_bias")
	f(`,"logit_bias":{"-1":1}`, "logit_bias")
	f(`,"logit_bias":{"":1}`, "logit_bias")
	f(`,"logit_bias":{"99999999999999999999":1}`, "logit_bias")
	f(`,"logit_bias":{"5":1,"SECRET\"x":1}`, "logit_bias")
	f(`,"logit_bias":{"5":100.5}`, "logit_bias.5")
	f(`,"logit_bias":{"5":1,"6":-101}`, "logit_bias.6")
	var many strings.Builder
	many.WriteString(`,"logit_bias":{`)
	for i := range MaxLogitBias + 1 {
		if i > 0 {
			many.WriteByte(',')
		}
		many.WriteString(`"` + strconv.Itoa(i) + `":1`)
	}
	many.WriteString(`}`)
	f(many.String(), "logit_bias")

	// The bad key is quoted in the message.
	_, _, ce, _ := toEngineBoth(t, `,"logit_bias":{"SECRET\"x":1}`)
	if ce == nil || !strings.Contains(ce.Message, `"SECRET\"x"`) {
		t.Errorf("bad key message: %+v", ce)
	}
}

// TestLogitBiasDecode: the decoder keeps at most MaxLogitBias entries
// however many the body holds, and type errors name the value's path.
func TestLogitBiasDecode(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"messages":[],"logit_bias":{`)
	const n = 3 * MaxLogitBias
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + strconv.Itoa(i) + `":-1`)
	}
	b.WriteString(`}}`)
	r := decodeChat(t, b.String())
	if r.LogitBias.Count != n || len(r.LogitBias.Entries) != MaxLogitBias || !r.LogitBias.Set {
		t.Errorf("count %d, %d entries kept, want %d and %d", r.LogitBias.Count, len(r.LogitBias.Entries), n, MaxLogitBias)
	}

	f := func(body, param string) {
		t.Helper()
		var r ChatRequest
		err := DecodeChatRequest([]byte(body), &r)
		pe, ok := err.(*ParamError)
		if !ok || pe.Param != param || pe.Code != CodeInvalidType {
			t.Errorf("%s: got %v, want %q %q", body, err, param, CodeInvalidType)
		}
	}
	f(`{"logit_bias":[1]}`, "logit_bias")
	f(`{"logit_bias":"x"}`, "logit_bias")
	f(`{"logit_bias":{"5":"x"}}`, "logit_bias.5")
	f(`{"repetition_penalty":"x"}`, "repetition_penalty")
	f(`{"min_p":true}`, "min_p")
}

// TestLogitBiasRoundTrip: the codec writes what it read.
func TestLogitBiasRoundTrip(t *testing.T) {
	r := decodeChat(t, `{"messages":[],"logit_bias":{"9":-100,"2":0.5}}`)
	marshal := func(b LogitBias) string {
		var w jwriter.Writer
		b.MarshalEasyJSON(&w)
		out, _ := w.BuildBytes()
		return string(out)
	}
	if out := marshal(r.LogitBias); out != `{"9":-100,"2":0.5}` {
		t.Errorf("marshal: %s", out)
	}
	if out := marshal(LogitBias{}); out != "null" {
		t.Errorf("unset: %s", out)
	}
}
