package integration_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/internal/eventually"
	"github.com/vajra-go/vajra/internal/llamaserver"
)

// TestRemoteTokenizerFailover: without --tokenizer, Vajra builds its
// tokenizer from the llama-server that answered first and encodes prompts
// on the workers. When that worker dies, chat, completions and /tokenize
// go on being served by the other one, with the same token ids.
func TestRemoteTokenizerFailover(t *testing.T) {
	llamaserver.Need(t)
	path, err := tinymodel.TempFile(t.TempDir(), tinymodel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-np", "2", "-c", "2048", "-t", "1"}
	first := llamaserver.Start(t, path, args...)
	second := llamaserver.Start(t, path, args...)
	// The second is down while Vajra starts, so the tokenizer comes from
	// the first.
	second.Kill()
	srv, base := startRemote(t, nil, workerURL(first), workerURL(second))
	addr := strings.TrimPrefix(base, "http://")
	re := srv.Engine().(*remote.Engine)
	tokenize := func() []int {
		t.Helper()
		status, _, body := get(t, addr, "POST", "/tokenize", `{"model":"`+tinyName+`","prompt":"Hello, sea!"}`)
		if status != 200 {
			t.Fatalf("/tokenize: %d %s", status, body)
		}
		var out struct {
			Tokens []int `json:"tokens"`
		}
		if err := json.Unmarshal([]byte(body), &out); err != nil || len(out.Tokens) == 0 {
			t.Fatalf("/tokenize: %v %s", err, body)
		}
		return out.Tokens
	}
	before := tokenize()
	second.Restart(t)
	eventually.True(t, "the second worker healthy", func() bool { return re.Workers()[1].Healthy() })
	first.Kill()

	client := newClient(base)
	for i := range 3 {
		res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(4),
		}, greedyEOS...)
		if err != nil || res.Usage.CompletionTokens != 4 || res.Usage.PromptTokens == 0 {
			t.Fatalf("chat %d with the first worker dead: %v", i, err)
		}
	}
	comp, err := client.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: tinyName, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Hello, sea!")}, MaxTokens: openai.Int(3),
	}, greedyEOS...)
	if err != nil || comp.Usage.CompletionTokens != 3 || int(comp.Usage.PromptTokens) != len(before) {
		t.Fatalf("completion with the first worker dead: %v (prompt %d tokens, /tokenize said %d)", err, comp.Usage.PromptTokens, len(before))
	}
	after := tokenize()
	if len(after) != len(before) {
		t.Fatalf("/tokenize %v after the failover, %v before", after, before)
	}
	for i := range after {
		if after[i] != before[i] {
			t.Fatalf("/tokenize %v after the failover, %v before", after, before)
		}
	}
	if re.Workers()[0].Healthy() {
		t.Fatal("the dead worker is still marked healthy")
	}
}
