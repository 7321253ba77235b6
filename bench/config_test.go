package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestResolveTargetLoopbackOnly(t *testing.T) {
	f := func(url, basePath, wantAddr, wantPath string, wantErr error) {
		t.Helper()
		tg, err := resolveTarget(url, basePath)
		if wantErr != nil {
			if !errors.Is(err, wantErr) {
				t.Errorf("resolveTarget(%q) err = %v, want %v", url, err, wantErr)
			}
			return
		}
		if err != nil || tg.addr != wantAddr || tg.basePath != wantPath {
			t.Errorf("resolveTarget(%q, %q) = %+v, %v; want %s %s", url, basePath, tg, err, wantAddr, wantPath)
		}
	}
	f("http://127.0.0.1:8000", "/v1", "127.0.0.1:8000", "/v1", nil)
	f("http://127.9.8.7:1", "/v1", "127.9.8.7:1", "/v1", nil)
	f("http://localhost:8000", "/v1", "127.0.0.1:8000", "/v1", nil)
	f("http://LOCALHOST:8000", "/v1", "127.0.0.1:8000", "/v1", nil)
	f("http://[::1]:8000", "/v1", "[::1]:8000", "/v1", nil)
	f("http://127.0.0.1:8000", "/openai/v1/", "127.0.0.1:8000", "/openai/v1", nil)
	f("http://127.0.0.1:8000/openai/v1", "/v1", "127.0.0.1:8000", "/openai/v1", nil)
	f("http://127.0.0.1", "", "127.0.0.1:80", "", nil)
	f("http://10.0.0.1:8000", "/v1", "", "", ErrNotLoopback)
	f("http://192.168.1.1:8000", "/v1", "", "", ErrNotLoopback)
	f("http://[::2]:8000", "/v1", "", "", ErrNotLoopback)
	f("http://0.0.0.0:8000", "/v1", "", "", ErrNotLoopback)
	f("http://example.com:8000", "/v1", "", "", ErrNotLoopback)
	f("http://localhost.example.com", "/v1", "", "", ErrNotLoopback)
	f("http://[::ffff:10.0.0.1]:80", "/v1", "", "", ErrNotLoopback)
	f("https://127.0.0.1:8000", "/v1", "", "", ErrConfig)
}

func TestMainRefusesNonLoopback(t *testing.T) {
	for _, args := range [][]string{
		{"-url", "http://10.1.2.3:8000", "-n", "1"},
		{"-url", "http://127.0.0.1:1", "-compare", "http://8.8.8.8:80", "-n", "1"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "not a loopback address") {
			t.Errorf("Main(%q) = %d, stderr %q", args, code, errb.String())
		}
		if out.Len() != 0 {
			t.Errorf("Main(%q) printed %q before refusing", args, out.String())
		}
	}
}

func TestMainHelpListsEveryFlag(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"-h"}, &out, &errb); code != 0 {
		t.Fatalf("-h exit %d", code)
	}
	for _, fl := range []string{"-c", "-rate", "-warmup", "-duration", "-n", "-prompt-tokens", "-max-tokens",
		"-dialect", "-model", "-api-key", "-url", "-base-path", "-stream", "-ramp", "-itl", "-server-pid",
		"-out", "-html", "-compare", "-compare-pid", "-rounds", "-max-time", "-request-timeout", "-engine-cpu",
		"-ramp-streams", "-ramp-resolution", "-ramp-retries", "-knee-p99", "-syscalls", "-no-drain", "-compare-label"} {
		if !strings.Contains(errb.String(), "\n  "+fl+" ") && !strings.Contains(errb.String(), "\n  "+fl+"\n") {
			t.Errorf("-h does not document %s", fl)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	f := func(mod func(*Config), ok bool) {
		t.Helper()
		c := DefaultConfig()
		mod(&c)
		if err := c.validate(); (err == nil) != ok {
			t.Errorf("validate = %v, want ok=%v", err, ok)
		}
	}
	f(func(c *Config) {}, true)
	f(func(c *Config) { c.Duration, c.Requests = 0, 0 }, false) // unbounded
	f(func(c *Config) { c.Duration, c.Requests = 0, 10 }, true)
	f(func(c *Config) { c.Concurrency = 0 }, false)
	f(func(c *Config) { c.Concurrency = MaxConcurrency + 1 }, false)
	f(func(c *Config) { c.Rate = -1 }, false)
	f(func(c *Config) { c.MaxTime = 0 }, false)
	f(func(c *Config) { c.Dialect = "grpc" }, false)
	f(func(c *Config) { c.Dialect, c.Stream = DialectRealtime, false }, false)
	f(func(c *Config) { c.EngineCPU = true }, false) // no -server-pid
	f(func(c *Config) { c.EngineCPU, c.ServerPID = true, 1 }, true)
	f(func(c *Config) { c.ExtraBody = `{"skip_special_tokens":false}` }, true)
	f(func(c *Config) { c.ExtraBody = `[1]` }, false)
	f(func(c *Config) { c.ExtraBody = `{"a":` }, false)
	f(func(c *Config) { c.ExtraBody, c.Dialect = `{"a":1}`, DialectRealtime }, false)
}

// TestRequestForExtraBody: -extra-body's fields reach every kind of
// request body, replacing the bench's own of the same name, beside
// -top-logprobs.
func TestRequestForExtraBody(t *testing.T) {
	c := DefaultConfig()
	c.ExtraBody, c.TopLogprobs = `{"skip_special_tokens":false,"max_tokens":5}`, 2
	for _, d := range []Dialect{DialectChat, DialectCompletions, DialectResponses, DialectMessages} {
		c.Dialect = d
		var m map[string]any
		if err := json.Unmarshal(requestFor(&c, "hi", false, ""), &m); err != nil {
			t.Fatal(err)
		}
		if m["skip_special_tokens"] != false || m["max_tokens"] != 5.0 || m["ignore_eos"] != true {
			t.Errorf("%s: %v", d, m)
		}
		if (m["top_logprobs"] == 2.0) != (d == DialectChat) {
			t.Errorf("%s: top_logprobs %v", d, m["top_logprobs"])
		}
	}
}
