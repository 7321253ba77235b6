package httpparse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestAppendResponse(t *testing.T) {
	f := func(got []byte, want string) {
		t.Helper()
		if string(got) != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	f(AppendStatusLine(nil, 1, 200), "HTTP/1.1 200 OK\r\n")
	f(AppendStatusLine(nil, 0, 404), "HTTP/1.0 404 Not Found\r\n")
	f(AppendStatusLine(nil, 1, 599), "HTTP/1.1 599 \r\n")
	f(AppendHeader(nil, "Content-Type", "text/event-stream"), "Content-Type: text/event-stream\r\n")
	f(AppendHeader(nil, "X-B", []byte("v")), "X-B: v\r\n")
	f(AppendHeader(nil, "X-Inject", "a\r\nSet-Cookie: x\x00"), "X-Inject: a  Set-Cookie: x \r\n")
	f(AppendContentLength(nil, 1234), "Content-Length: 1234\r\n")
	f(AppendChunkHeader(nil, 255), "ff\r\n")
	f(AppendChunk(nil, []byte("hello")), "5\r\nhello\r\n")
	f(AppendChunk([]byte("x"), nil), "x")
	f(AppendLastChunk(nil), "0\r\n\r\n")
	f(AppendCRLF(nil), "\r\n")
	f(AppendDate(nil, time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)), "Date: Thu, 02 Jan 2025 03:04:05 GMT\r\n")
	if StatusText(431) != "Request Header Fields Too Large" || StatusText(999) != "" {
		t.Fatal("StatusText")
	}
}

// TestChunkWriterRoundTrip: what AppendChunk writes, our parser reads.
func TestChunkWriterRoundTrip(t *testing.T) {
	b := []byte("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
	var want []byte
	for i := 1; i < 300; i += 37 {
		d := bytes.Repeat([]byte{byte('a' + i%26)}, i)
		want = append(want, d...)
		b = AppendChunk(b, d)
	}
	b = AppendLastChunk(b)
	var req Request
	if n, err := defaultParser().Parse(b, &req); n != len(b) || err != nil || !bytes.Equal(req.Body, want) {
		t.Fatal(n, err)
	}
}

// TestCannedResponses: every error's canned response is a valid HTTP/1.1
// response (net/http reads it) with Connection: close, the error's status,
// and an OpenAI-shaped JSON body carrying the error's code.
func TestCannedResponses(t *testing.T) {
	check := func(name string, raw []byte, status int, code string) {
		t.Helper()
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
		if err != nil {
			t.Fatalf("%s: %v: %q", name, err, raw)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != status || !resp.Close || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %q", name, raw)
		}
		var v struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    string  `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &v); err != nil || v.Error.Code != code || v.Error.Message == "" || v.Error.Param != nil || v.Error.Type == "" {
			t.Fatalf("%s: body %s (%v)", name, body, err)
		}
	}
	for sentinel, info := range errTable {
		e := newError(sentinel, nil, 0)
		check(info.code, e.Response(), info.status, info.code)
		withDate := AppendErrorResponse(nil, e, time.Unix(0, 0))
		check(info.code+"+date", withDate, info.status, info.code)
		if !bytes.Contains(withDate, []byte("\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\n")) {
			t.Fatalf("no Date: %q", withDate)
		}
	}
	for status, sc := range statusCodes {
		check(sc.code, ErrorResponse(status), status, sc.code)
	}
	if ErrorResponse(200) != nil {
		t.Fatal("canned 200")
	}
}

// TestErrorsMapped: every sentinel has a table row with a status that
// fits, and a Code that is stable snake_case.
func TestErrorsMapped(t *testing.T) {
	for err, info := range errTable {
		if !strings.HasPrefix(err.Error(), "httpparse: ") {
			t.Errorf("%v: no package prefix", err)
		}
		switch info.status {
		case 400, 413, 414, 417, 431, 500, 501, 505:
		default:
			t.Errorf("%v: status %d", err, info.status)
		}
		for _, c := range info.code {
			if (c < 'a' || c > 'z') && c != '_' && (c < '0' || c > '9') {
				t.Errorf("%v: code %q", err, info.code)
			}
		}
	}
}

func BenchmarkAppendResponseHead(b *testing.B) {
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendStatusLine(buf[:0], 1, 200)
		buf = AppendHeader(buf, "Content-Type", "text/event-stream")
		buf = AppendHeader(buf, "Cache-Control", "no-cache")
		buf = append(buf, "Transfer-Encoding: chunked\r\n\r\n"...)
		buf = AppendChunk(buf, []byte("data: {}\n\n"))
	}
	b.SetBytes(int64(len(buf)))
}
