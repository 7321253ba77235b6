package vllm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/internal/testworker"
	"github.com/vajra-go/vajra/internal/vllmserver"
)

// The tests against a real `vllm serve MODEL --grpc` (a CPU build of vLLM
// in the venv that `make vllm` installs into .vllm) on a tiny random-weight
// Llama with the real Llama 3 tokenizer, written by tinymodel.py. They
// skip when the venv is missing, and fail instead with VAJRA_REQUIRE_VLLM
// set.

// runReal is run with a wait for a loaded machine: the tiny model's steps
// take milliseconds, but two cores shared with builds make them seconds.
func runReal(t *testing.T, c *Client, g *remote.Generate) (*testworker.Recorder, *remote.End) {
	t.Helper()
	rx := testworker.NewRecorder()
	if _, err := c.Generate(context.Background(), g, rx); err != nil {
		t.Fatal(err)
	}
	return rx, rx.Wait(t, 2*time.Minute)
}

func TestRealVLLM(t *testing.T) {
	var srv *vllmserver.Server
	var tokJSON string
	addr := os.Getenv("VAJRA_VLLM_ADDR")
	if addr == "" {
		srv = vllmserver.Start(t, true)
		addr = srv.Addr
		tokJSON = string(must(os.ReadFile(filepath.Join(vllmserver.TokenizerDir(t), "tokenizer.json"))))
	}
	c := dial(t, addr)
	ctx := context.Background()
	if srv != nil {
		// Start-up on two shared cores takes minutes.
		srv.Wait(t, 15*time.Minute, func() bool { return c.Health(ctx) == nil })
	}

	t.Run("Info", func(t *testing.T) {
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.ServedModelName != "tiny" || info.MaxContextLength != 2048 || info.VocabSize != 128256 || len(info.EOSTokenIDs) == 0 {
			t.Errorf("info %+v", info)
		}
	})
	t.Run("TokenizerFiles", func(t *testing.T) {
		files, err := c.TokenizerFiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tokJSON == "" {
			tokJSON = string(files["tokenizer.json"])
		}
		if string(files["tokenizer.json"]) != tokJSON || len(files["tokenizer.json"]) < 1<<20 || len(files["tokenizer_config.json"]) == 0 {
			t.Errorf("files: %d names; tokenizer.json %d bytes, want %d", len(files), len(files["tokenizer.json"]), len(tokJSON))
		}
	})
	prompt := []int32{128000, 9906, 11, 1917, 0} // <|begin_of_text|>Hello, world!
	t.Run("N2Logprobs", func(t *testing.T) {
		g := &remote.Generate{ID: "real-n2", Prompt: prompt, MaxTokens: 8, CachePrompt: true,
			Sampling: &engine.Sampling{N: 2, Temperature: 1, Seed: 7, HasSeed: true, IgnoreEOS: true, Logprobs: true, TopLogprobs: 2}}
		rx, end := runReal(t, c, g)
		if end.Err != nil {
			t.Fatal(end.Err)
		}
		for ch := 0; ch < 2; ch++ {
			if len(rx.IDs[ch]) != 8 || end.Choices[ch].FinishReason != "length" || end.Choices[ch].CompletionTokens != 8 {
				t.Errorf("choice %d: %d tokens, end %+v", ch, len(rx.IDs[ch]), end.Choices[ch])
			}
			if len(rx.Logprobs[ch]) != 8 || len(rx.Top[ch]) != 8 || len(rx.Top[ch][0]) < 2 {
				t.Errorf("choice %d: %d logprobs %d top rows", ch, len(rx.Logprobs[ch]), len(rx.Top[ch]))
			}
			for k, lp := range rx.Logprobs[ch] {
				if lp > 0 {
					t.Errorf("choice %d token %d: logprob %v > 0", ch, k, lp)
				}
			}
		}
		if end.PromptTokens != len(prompt) {
			t.Errorf("prompt tokens %d, want %d", end.PromptTokens, len(prompt))
		}
	})
	t.Run("GreedyDeterministic", func(t *testing.T) {
		// Temperature 0 reaches vLLM as a present 0: greedy, the same
		// tokens twice. (vLLM refuses n > 1 with greedy sampling, 400.)
		var got [2][]int32
		for i := range got {
			g := &remote.Generate{ID: fmt.Sprint("real-greedy-", i), Prompt: prompt, MaxTokens: 8, Sampling: &engine.Sampling{IgnoreEOS: true}}
			rx, end := runReal(t, c, g)
			if end.Err != nil {
				t.Fatal(end.Err)
			}
			got[i] = rx.IDs[0]
		}
		if len(got[0]) != 8 || fmt.Sprint(got[0]) != fmt.Sprint(got[1]) {
			t.Errorf("greedy runs differ: %v %v", got[0], got[1])
		}
		g := &remote.Generate{ID: "real-greedy-n2", Prompt: prompt, MaxTokens: 8, Sampling: &engine.Sampling{N: 2}}
		_, end := runReal(t, c, g)
		var we *remote.WorkerError
		if !errors.As(end.Err, &we) || we.Status != 400 || we.Retryable {
			t.Errorf("greedy n=2: %v, want vLLM's 400", end.Err)
		}
	})
	t.Run("StopToken", func(t *testing.T) {
		g := &remote.Generate{ID: "real-first", Prompt: prompt, MaxTokens: 4, Sampling: &engine.Sampling{IgnoreEOS: true}}
		rx, end := runReal(t, c, g)
		if end.Err != nil || len(rx.IDs[0]) != 4 {
			t.Fatalf("%v %v", rx.IDs[0], end.Err)
		}
		stop := rx.IDs[0][2]
		g = &remote.Generate{ID: "real-stop", Prompt: prompt, MaxTokens: 4, Sampling: &engine.Sampling{IgnoreEOS: true, StopTokenIDs: []int{int(stop)}}}
		rx, end = runReal(t, c, g)
		// The stop token may come earlier than position 2 too.
		if end.Err != nil || end.Choices[0].FinishReason != "stop" || end.Choices[0].MatchedTokenID != stop || len(rx.IDs[0]) > 3 {
			t.Errorf("tokens %v end %+v", rx.IDs[0], end.Choices[0])
		}
	})
	t.Run("MinTokens", func(t *testing.T) {
		// The end-of-sequence token forced by logit_bias ends the output
		// at once; vLLM's min_tokens bans it for the first 5 tokens.
		info, err := c.Info(ctx)
		if err != nil || len(info.EOSTokenIDs) == 0 {
			t.Fatalf("info %+v, %v", info, err)
		}
		eos := info.EOSTokenIDs[0]
		sp := &engine.Sampling{LogitBias: []engine.TokenBias{{TokenID: int(eos), Bias: 100}}}
		g := &remote.Generate{ID: "real-min0", Prompt: prompt, MaxTokens: 12, Sampling: sp}
		rx, end := runReal(t, c, g)
		if end.Err != nil || end.Choices[0].CompletionTokens > 1 {
			t.Fatalf("forced EOS without min_tokens: %v, end %+v", rx.IDs[0], end)
		}
		g = &remote.Generate{ID: "real-min5", Prompt: prompt, MaxTokens: 12, MinTokens: 5, Sampling: sp}
		rx, end = runReal(t, c, g)
		n := end.Choices[0].CompletionTokens
		if end.Err != nil || n < 5 || n > 6 || end.Choices[0].FinishReason != "stop" || len(rx.IDs[0]) < 5 {
			t.Fatalf("min_tokens 5: tokens %v, end %+v", rx.IDs[0], end)
		}
		for _, id := range rx.IDs[0][:5] {
			if id == eos {
				t.Fatalf("EOS among the first 5 tokens %v", rx.IDs[0])
			}
		}
	})
	t.Run("RefusedGrammar", func(t *testing.T) {
		// A grammar vLLM cannot compile (a rule it does not define; the ones
		// Vajra sends are compiled by xgrammar in TestEBNFXGrammar) is the
		// worker's 400, not an empty answer.
		g := &remote.Generate{ID: "real-bad-grammar", Prompt: prompt, MaxTokens: 8, Sampling: &engine.Sampling{},
			Constraint: remote.Constraint{Kind: remote.ConstraintGrammar, Value: `root ::= "x" undefined-rule`}}
		rx, end := runReal(t, c, g)
		var we *remote.WorkerError
		if !errors.As(end.Err, &we) || we.Status != 400 || we.Retryable || len(rx.IDs[0]) != 0 {
			t.Errorf("refused grammar: tokens %v, end %+v (err %v)", rx.IDs[0], end, end.Err)
		}
	})
	t.Run("Abort", func(t *testing.T) {
		rx := testworker.NewRecorder()
		g := &remote.Generate{ID: "real-abort", Prompt: prompt, MaxTokens: 2000, Sampling: &engine.Sampling{IgnoreEOS: true, Temperature: 1}}
		call, err := c.Generate(ctx, g, rx)
		if err != nil {
			t.Fatal(err)
		}
		testworker.WaitFor(t, time.Minute, "3 tokens", func() bool { return rx.Count(0) >= 3 })
		call.Abort()
		end := rx.Wait(t, 2*time.Second)
		if end.Err != nil || end.Choices[0].FinishReason != "abort" {
			t.Errorf("end %+v", end)
		}
		testworker.WaitFor(t, 10*time.Second, "vLLM's running count back to 0", func() bool {
			l, err := c.Load(ctx)
			return err == nil && l.Running == 0
		})
	})
	t.Run("KilledMidStream", func(t *testing.T) {
		if srv == nil {
			t.Skip("not ours to kill")
		}
		rx := testworker.NewRecorder()
		g := &remote.Generate{ID: "real-kill", Prompt: prompt, MaxTokens: 2000, Sampling: &engine.Sampling{IgnoreEOS: true, Temperature: 1}}
		if _, err := c.Generate(ctx, g, rx); err != nil {
			t.Fatal(err)
		}
		testworker.WaitFor(t, time.Minute, "3 tokens", func() bool { return rx.Count(0) >= 3 })
		srv.Kill()
		end := rx.Wait(t, 2*time.Second)
		var we *remote.WorkerError
		if !errors.As(end.Err, &we) || we.Retryable {
			t.Errorf("End.Err %v", end.Err)
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
