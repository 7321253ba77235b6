package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestPprofLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:0", ":0", "example.com:0", "nonsense"} {
		if _, _, err := servePprof(addr); err == nil {
			t.Errorf("servePprof(%q) = nil error, want a refusal", addr)
		}
	}
	addr, stop, err := servePprof("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("GET /debug/pprof/: %d %.200s", resp.StatusCode, body)
	}
}
