package llama

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

var testTools = []engine.Tool{
	{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string","maxLength":6},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}`)},
	{Name: "get_time", Parameters: []byte(`{"type":"object","properties":{"tz":{"type":"string","maxLength":4}},"required":["tz"],"additionalProperties":false}`)},
}

func TestNamedToolChoiceForcesTheCall(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	for _, stream := range []bool{false, true} {
		req := chatReq("What's the weather?", 200)
		req.Tools = testTools
		req.ToolChoice = engine.ToolChoice{Mode: engine.ToolChoiceNamed, Name: "get_weather"}
		req.Stream = stream
		req.Sampling.Temperature, req.Sampling.Seed, req.Sampling.HasSeed = 0.8, 1, true
		res, rec := run(t, e, req)
		c := res.Choices[0]
		if c.FinishReason != engine.FinishToolCalls || len(c.ToolCalls) != 1 || c.ToolCalls[0].Name != "get_weather" || c.Text != "" {
			t.Fatalf("stream %v: finish %s calls %+v text %q", stream, c.FinishReason, c.ToolCalls, c.Text)
		}
		var args struct{ City, Unit string }
		if err := json.Unmarshal([]byte(c.ToolCalls[0].Arguments), &args); err != nil || (args.Unit != "c" && args.Unit != "f") {
			t.Fatalf("arguments %q: %v", c.ToolCalls[0].Arguments, err)
		}
		if stream {
			if got := rec.text(0, engine.DeltaToolCallArgs); got != c.ToolCalls[0].Arguments {
				t.Fatalf("streamed arguments %q, final %q", got, c.ToolCalls[0].Arguments)
			}
			if rec.deltas[0].kind != engine.DeltaToolCallStart {
				t.Fatalf("first delta %+v", rec.deltas[0])
			}
		}
	}
}

func TestRequiredToolChoiceMakesCalls(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	for seed := int64(0); seed < 3; seed++ {
		req := chatReq("Call something.", 300)
		req.Tools = testTools
		req.ToolChoice = engine.ToolChoice{Mode: engine.ToolChoiceRequired}
		req.Stream = true
		req.Sampling.Temperature, req.Sampling.Seed, req.Sampling.HasSeed = 0.8, seed, true
		res, rec := run(t, e, req)
		c := res.Choices[0]
		if c.FinishReason != engine.FinishToolCalls || len(c.ToolCalls) == 0 {
			t.Fatalf("finish %s calls %+v text %q", c.FinishReason, c.ToolCalls, c.Text)
		}
		// The arguments stream in pieces, each call's after its start.
		var streamed []string
		pieces := 0
		for _, d := range rec.deltas {
			switch d.kind {
			case engine.DeltaToolCallStart:
				streamed = append(streamed, "")
			case engine.DeltaToolCallArgs:
				streamed[len(streamed)-1] += d.text
				pieces++
			}
		}
		if len(streamed) != len(c.ToolCalls) || pieces <= len(streamed) {
			t.Fatalf("%d calls, %d streamed in %d pieces", len(c.ToolCalls), len(streamed), pieces)
		}
		for i, call := range c.ToolCalls {
			if call.Name != "get_weather" && call.Name != "get_time" || !strings.HasPrefix(call.ID, "call_") || !json.Valid([]byte(call.Arguments)) {
				t.Fatalf("call %d: %+v", i, call)
			}
			if streamed[i] != call.Arguments {
				t.Fatalf("call %d streamed %q, final %q", i, streamed[i], call.Arguments)
			}
		}
	}
}
