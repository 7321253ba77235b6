package integration_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/vajra-go/vajra"
)

// TestResponseStoreMetrics: the response store's figures are on /metrics.
func TestResponseStoreMetrics(t *testing.T) {
	_, _, base := startServer(t, nil)
	addr := strings.TrimPrefix(base, "http://")
	client := newClient(base)
	res, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model:           vajra.DefaultModelName,
		Input:           textInput("hello"),
		MaxOutputTokens: openai.Int(8),
	})
	if err != nil {
		t.Fatal(err)
	}
	mfs := scrape(t, addr)
	if v := value(mfs, "vajra_responses_stored_total"); v != 1 {
		t.Errorf("stored_total = %v, want 1", v)
	}
	if v := value(mfs, "vajra_responses_store_count"); v != 1 {
		t.Errorf("store_count = %v, want 1", v)
	}
	if v := value(mfs, "vajra_responses_background_running"); v != 0 {
		t.Errorf("background_running = %v, want 0", v)
	}
	if v := value(mfs, "vajra_responses_store_bytes"); v < float64(len(res.ID)) {
		t.Errorf("store_bytes = %v", v)
	}
	if err := client.Responses.Delete(context.Background(), res.ID); err != nil {
		t.Fatal(err)
	}
	mfs = scrape(t, addr)
	if v := value(mfs, "vajra_responses_deleted_total"); v != 1 {
		t.Errorf("deleted_total = %v, want 1", v)
	}
	if v := value(mfs, "vajra_responses_store_count"); v != 0 {
		t.Errorf("store_count after delete = %v, want 0", v)
	}
}
