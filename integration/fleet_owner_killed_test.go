package integration_test

import (
	"context"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/internal/eventually"
	"github.com/vajra-go/vajra/internal/redistest"
)

// TestFleetOwnerKilledMidResponse: the node running a background response
// is killed (SIGKILL: no shutdown, no final save) mid-response. Another
// node of the fleet reports the response ended, failed with the output
// saved so far, within the owner's lease (at most 10 s after the kill),
// and DELETE works there. The owner is a separate process: bin/vajra,
// built by the test.
func TestFleetOwnerKilledMidResponse(t *testing.T) {
	if testing.Short() {
		t.Skip("builds bin/vajra")
	}
	r := redistest.Start(t)
	bin := filepath.Join(t.TempDir(), "vajra")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/vajra").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	owner := exec.Command(bin, "serve", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--response-store", fleetURL(r), "--sim-itl", "20ms", "--sim-mode", "echo")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Process.Kill(); _ = owner.Wait() })
	baseA := "http://127.0.0.1:" + strconv.Itoa(port)
	eventually.True(t, "the owner node comes up", func() bool {
		res, err := http.Get(baseA + "/health")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	a := newClient(baseA)
	b := newClient(startFleetNode(t, fleetURL(r)))
	ctx := context.Background()
	// The owner echoes the input, so the answer is as long as this input
	// whatever the sampler draws (a text-mode answer may end after 16
	// tokens, before the first progress save): about 500 tokens, 10 s at
	// 20 ms a token, against a progress save every second.
	res, err := a.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(strings.Repeat("the river runs past the old mill and on to the sea. ", 40)),
		MaxOutputTokens: openai.Int(4000), Background: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(t, b, res.ID, func(r *responses.Response) bool {
		return r.Status == responses.ResponseStatusInProgress && r.OutputText() != ""
	})
	if err := owner.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = owner.Wait()
	killed := time.Now()
	var got *responses.Response
	eventually.True(t, "the other node reports the response no longer in flight", func() bool {
		got, err = b.Responses.Get(ctx, res.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		return !inFlight(got.Status)
	})
	t.Logf("reported %s %v after the kill", got.Status, time.Since(killed).Round(time.Millisecond))
	if got.Status != responses.ResponseStatusFailed || got.OutputText() == "" || got.Error.Message == "" {
		t.Fatalf("after the owner died: %s", got.RawJSON())
	}
	if _, err := b.Responses.Cancel(ctx, res.ID); err == nil {
		// A cancel of an ended response answers it; either way no 5 s wait
		// for an owner that is gone, and no 5xx.
	} else if apiErr := (*openai.Error)(nil); asError(err, &apiErr) && apiErr.StatusCode >= 500 {
		t.Fatalf("cancel after the owner died: %v", err)
	}
	if err := b.Responses.Delete(ctx, res.ID); err != nil {
		t.Fatalf("DELETE after the owner died: %v", err)
	}
	if _, err := b.Responses.Get(ctx, res.ID, responses.ResponseGetParams{}); err == nil {
		t.Fatal("the response is still there after DELETE")
	}
}
