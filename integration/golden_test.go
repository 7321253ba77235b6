package integration_test

import (
	"bytes"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Golden files of each dialect's stream, byte for byte, through the real
// server with a fixed seed (or temperature 0 where the API has no seed). Ids and timestamps change per request, so they
// are normalised before the comparison; everything else (event names and
// order, sequence numbers, token text, logprobs, usage, the SSE framing)
// must match. The HTTP chunk framing is undone by net/http (its sizes
// depend on the ids' lengths). Rewrite with: go test -run TestGolden -update
var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

var goldenCases = []struct {
	name, path, body string
}{
	{"chat", "/v1/chat/completions", `{"model":"vajra-sim","messages":[{"role":"user","content":"Tell me about the sea."}],
		"stream":true,"seed":42,"temperature":0.7,"max_tokens":6,"ignore_eos":true,"logprobs":true,"top_logprobs":2,
		"stream_options":{"include_usage":true}}`},
	{"chat_tools", "/v1/chat/completions", `{"model":"vajra-sim","messages":[{"role":"user","content":"Weather in Oslo?"}],
		"stream":true,"seed":42,"max_tokens":200,"tool_choice":"required",
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]}`},
	{"completions", "/v1/completions", `{"model":"vajra-sim","prompt":"Once upon a time","stream":true,"seed":42,
		"n":2,"max_tokens":4,"ignore_eos":true,"logprobs":1,"stream_options":{"include_usage":true}}`},
	{"responses", "/v1/responses", `{"model":"vajra-sim","input":"Tell me about the sea.","stream":true,
		"max_output_tokens":6,"temperature":0,"instructions":"Be brief.","metadata":{"k":"v"}}`},
	{"messages", "/v1/messages", `{"model":"vajra-sim","max_tokens":6,"temperature":0,"stream":true,"system":"Be brief.",
		"messages":[{"role":"user","content":"Tell me about the sea."}]}`},
}

// goldenIDs matches the per-request ids of every dialect (response, item,
// call and tool-use ids) and goldenTimes the Unix timestamps.
var (
	goldenIDs   = regexp.MustCompile(`"(chatcmpl-|cmpl-|resp_|msg_|rs_|fc_|call_|toolu_)[A-Za-z0-9_-]+"`)
	goldenTimes = regexp.MustCompile(`"(created|created_at|completed_at)":[0-9]+`)
)

func normalise(b []byte) []byte {
	b = goldenIDs.ReplaceAll(b, []byte(`"${1}ID"`))
	return goldenTimes.ReplaceAll(b, []byte(`"${1}":0`))
}

func TestGoldenStreams(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			// A fresh server per case: the prefix cache (cached tokens in
			// the usage) starts empty whichever cases run.
			_, _, base := startServer(t, nil)
			req, _ := http.NewRequest("POST", base+c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), got)
			}
			got = normalise(got)
			path := filepath.Join("testdata", "golden", c.name+".sse")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("stream differs from %s:\n got: %s\nwant: %s", path, got, want)
			}
		})
	}
}
