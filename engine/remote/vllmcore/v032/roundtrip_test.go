package v032

import (
	"slices"
	"testing"
)

func sampleOutputs(rows int) *OutputsMsg {
	l := Logprobs{Rows: rows, Cols: 3}
	var toks []int32
	for r := range rows {
		toks = append(toks, int32(100+r))
		l.TokenIDs = append(l.TokenIDs, int32(100+r), int32(200+r), int32(300+r))
		l.Logprobs = append(l.Logprobs, -float32(r), -1-float32(r), -2-float32(r))
		l.Ranks = append(l.Ranks, 1)
	}
	return &OutputsMsg{
		EngineIndex: 1,
		Outputs: []OutputMsg{
			{RequestID: "a", TokenIDs: toks, Logprobs: l, FinishReason: FinishLength, StopToken: -1},
			{RequestID: "b", TokenIDs: []int32{7}, FinishReason: FinishStop, StopToken: 7, HasPrefill: true, PromptTokens: 12, CachedTokens: 8},
			{RequestID: "c", TokenIDs: []int32{300000}, FinishReason: NoFinish, StopToken: -1},
		},
		Stats:     &Stats{Running: 3, Waiting: 1, KVCacheUsage: 0.25, StepCounter: 9},
		Timestamp: 12.5,
	}
}

func TestOutputsRoundTrip(t *testing.T) {
	for _, rows := range []int{1, 40} {
		m := sampleOutputs(rows)
		b, aux := AppendOutputs(nil, nil, m)
		if rows == 40 && len(aux) != 2 || rows == 1 && len(aux) != 0 {
			t.Fatalf("rows %d: %d extra frames", rows, len(aux))
		}
		var o Outputs
		if err := o.Decode(append([][]byte{b}, aux...)); err != nil {
			t.Fatal(err)
		}
		if o.EngineIndex != 1 || !o.HasStats || o.Stats.Running != 3 || o.Stats.KVCacheUsage != 0.25 || o.Timestamp != 12.5 || len(o.Outputs) != 3 {
			t.Fatalf("outputs %+v", o)
		}
		a, bo, c := &o.Outputs[0], &o.Outputs[1], &o.Outputs[2]
		if string(a.RequestID) != "a" || a.FinishReason != FinishLength || a.Logprobs.Rows != rows || a.Logprobs.Cols != 3 ||
			!slices.Equal(a.Logprobs.TokenIDs, m.Outputs[0].Logprobs.TokenIDs) || !slices.Equal(a.Logprobs.Logprobs, m.Outputs[0].Logprobs.Logprobs) {
			t.Fatalf("output a %+v", a)
		}
		if bo.StopToken != 7 || !bo.HasPrefill || bo.PromptTokens != 12 || bo.CachedTokens != 8 || bo.FinishReason != FinishStop {
			t.Fatalf("output b %+v", bo)
		}
		if c.FinishReason != NoFinish || !slices.Equal(c.TokenIDs, []int32{300000}) {
			t.Fatalf("output c %+v", c)
		}
	}
}

func BenchmarkDecodeOutputs(b *testing.B) {
	for _, rows := range []int{1, 40} {
		m := sampleOutputs(rows)
		msg, aux := AppendOutputs(nil, nil, m)
		frames := append([][]byte{msg}, aux...)
		b.Run("rows"+itoa(rows), func(b *testing.B) {
			var o Outputs
			b.ReportAllocs()
			b.SetBytes(int64(len(msg)))
			for range b.N {
				if err := o.Decode(frames); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// FuzzDecodeOutputs: any bytes decode to a value or an error, never a
// panic or a hang.
func FuzzDecodeOutputs(f *testing.F) {
	for _, rows := range []int{1, 40} {
		msg, aux := AppendOutputs(nil, nil, sampleOutputs(rows))
		f.Add(msg, len(aux) > 0)
	}
	f.Add([]byte{0x94, 0x00, 0x91, 0x92, 0xa1}, false)
	f.Fuzz(func(t *testing.T, b []byte, withAux bool) {
		frames := [][]byte{b}
		if withAux {
			frames = append(frames, make([]byte, 480), make([]byte, 480), make([]byte, 160))
		}
		var o Outputs
		_ = o.Decode(frames)
		_, _ = DecodeReady(b)
		_, _ = DecodeHello(b)
	})
}
