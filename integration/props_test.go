package integration_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/internal/realmodel"
)

func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer test-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// GET /v1/models shows the model file as root and llama-server's meta;
// GET /props answers in llama-server's shape.
func TestModelMetaAndProps(t *testing.T) {
	_, base := startReal(t, nil)
	_, list := getJSON(t, base+"/v1/models")
	m, _ := dig(list, "data", 0).(map[string]any)
	if root, _ := m["root"].(string); !strings.HasSuffix(root, realmodel.Name) {
		t.Fatalf("root %q", m["root"])
	}
	if dig(m, "meta", "n_embd") != 576.0 || dig(m, "meta", "n_vocab") != 49152.0 || dig(m, "meta", "n_ctx_train") != 8192.0 ||
		dig(m, "meta", "n_params").(float64) < 1e8 || dig(m, "meta", "size").(float64) < 5e7 {
		t.Fatalf("meta %v", m["meta"])
	}
	st, props := getJSON(t, base+"/props")
	if st != 200 || props["model_alias"] != realModelName || props["eos_token"] != "<|im_end|>" ||
		!strings.Contains(props["chat_template"].(string), "<|im_start|>") || props["total_slots"].(float64) < 1 ||
		dig(props, "default_generation_settings", "n_ctx") != 2048.0 || !strings.HasSuffix(props["model_path"].(string), realmodel.Name) {
		t.Fatalf("props %d %v", st, props)
	}

	cfg := vajra.DefaultConfig()
	cfg.Port, cfg.Loops = 0, 2
	_, sim := runServer(t, cfg)
	if st, _ := getJSON(t, sim+"/props"); st != 404 {
		t.Fatalf("simulated engine: GET /props %d", st)
	}
}
