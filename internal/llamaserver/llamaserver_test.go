package llamaserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// TestStartGenerateKill starts a real llama-server on a tiny model, asks it
// for tokens, kills it and restarts it on the same port.
func TestStartGenerateKill(t *testing.T) {
	model, err := tinymodel.TempFile(t.TempDir(), tinymodel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := Start(t, model, "-np", "2", "-c", "1024")
	complete := func() {
		t.Helper()
		resp, err := http.Post(s.URL()+"/completion", "application/json",
			strings.NewReader(`{"prompt":[1,2,3],"n_predict":4,"temperature":0,"return_tokens":true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Tokens []int `json:"tokens"`
		}
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		if len(out.Tokens) != 4 {
			t.Fatalf("got %d tokens, want 4: %v", len(out.Tokens), out.Tokens)
		}
	}
	complete()
	s.Kill()
	if s.healthy() {
		t.Fatal("healthy after Kill")
	}
	s.Restart(t)
	complete()
}
