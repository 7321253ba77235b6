package integration_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/vajra-go/vajra"
)

// TestRestartRebindsPort: a server stopped while clients were connected
// (its side of those connections then waits in TIME_WAIT) can be replaced at
// once by a new one on the same port, as with net.Listen's SO_REUSEADDR.
func TestRestartRebindsPort(t *testing.T) {
	start := func(port int) *vajra.Server {
		t.Helper()
		cfg := vajra.DefaultConfig()
		cfg.Port = port
		cfg.Loops = 1
		srv, err := vajra.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatalf("start on port %d: %v", port, err)
		}
		return srv
	}
	first := start(0)
	addr := first.Addr().String()
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	// Idle keep-alive connections that the server, not the client, closes.
	for i := 0; i < 4; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 512)
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	second := start(port)
	defer second.Stop(context.Background()) //nolint:errcheck
	c, err := net.Dial("tcp", second.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
