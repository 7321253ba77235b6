package httpparse

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// sdkRequest is what openai-node / openai-go send for a chat completion:
// the x-stainless-* headers, Bearer auth and a 2 KB JSON body.
var sdkRequest = func() string {
	msg := strings.Repeat("Summarise the following text in one sentence. ", 50)[:1940]
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + msg + `"}],"stream":true}`
	return "POST /v1/chat/completions HTTP/1.1\r\n" +
		"Host: api.vajra.example\r\n" +
		"Accept: application/json\r\n" +
		"Content-Type: application/json\r\n" +
		"User-Agent: OpenAI/JS 4.67.3\r\n" +
		"X-Stainless-Lang: js\r\n" +
		"X-Stainless-Package-Version: 4.67.3\r\n" +
		"X-Stainless-OS: Linux\r\n" +
		"X-Stainless-Arch: x64\r\n" +
		"X-Stainless-Runtime: node\r\n" +
		"X-Stainless-Runtime-Version: v20.11.1\r\n" +
		"X-Stainless-Retry-Count: 0\r\n" +
		"X-Stainless-Timeout: 600\r\n" +
		"Authorization: Bearer sk-proj-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\r\n" +
		"Accept-Encoding: gzip, deflate\r\n" +
		"Connection: keep-alive\r\n" +
		"Content-Length: " + itoa(len(body)) + "\r\n\r\n" + body
}()

const minimalGET = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"

const pipelinedGET = "GET /v1/models HTTP/1.1\r\nHost: api.vajra.example\r\nAuthorization: Bearer sk-test\r\nUser-Agent: OpenAI/Go 1.2.0\r\nAccept: application/json\r\n\r\n"

const chunkedRequest = "POST /v1/embeddings HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" +
	"11\r\n{\"input\":\"hello\",\r\n10\r\n\"model\":\"e5-big\"\r\n1\r\n}\r\n0\r\n\r\n"

func itoa(n int) string { return strconv.Itoa(n) }

func BenchmarkParse(b *testing.B) {
	cases := []struct {
		name string
		in   string
		reqs int
	}{
		{"SDKChat", sdkRequest, 1},
		{"MinimalGET", minimalGET, 1},
		{"Pipelined16", strings.Repeat(pipelinedGET, 16), 16},
	}
	for _, c := range cases {
		in := []byte(c.in)
		b.Run(c.name+"/Ours", func(b *testing.B) {
			p := defaultParser()
			var req Request
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				for off := 0; off < len(in); {
					n, err := p.Parse(in[off:], &req)
					if n == 0 || err != nil {
						b.Fatal(n, err)
					}
					off += n
				}
			}
		})
		b.Run(c.name+"/NetHTTP", func(b *testing.B) {
			rd := bytes.NewReader(in)
			br := bufio.NewReader(rd)
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				rd.Reset(in)
				br.Reset(rd)
				for k := 0; k < c.reqs; k++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := io.Copy(io.Discard, req.Body); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
