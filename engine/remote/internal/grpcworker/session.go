// Package grpcworker is what the vLLM and SGLang clients (engine/remote/vllm,
// engine/remote/sglang) share: one long-lived grpc.ClientConn per worker with
// keepalive and reconnection back-off, the receive loop of a Generate stream
// (decoded in place by Response, handed to the remote.Receiver as a
// remote.Chunk with reused slices), Abort, Close, and the mapping of gRPC
// status codes to *remote.WorkerError.
package grpcworker

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/vajra-go/vajra/engine/remote"
)

// Options tune a Session; the zero value takes the defaults.
type Options struct {
	// KeepaliveTime is how long a connection with calls in flight may be
	// silent before the client pings the worker (grpc-go raises anything
	// under 10 s to 10 s, its floor), KeepaliveTimeout how long it then
	// waits for the answer before it drops the connection and fails its
	// calls. Defaults 10 s and 2 s: a worker that vanishes without a TCP
	// reset (host down, network cut) is noticed within 12 s of silence; a
	// killed process resets its connections and is noticed at once. The
	// workers allow one ping per 10 s (vLLM's and SGLang's servers set
	// grpc.http2.min_ping_interval_without_data_ms = 10000).
	KeepaliveTime, KeepaliveTimeout time.Duration
	// MaxBackoff caps the delay between reconnection attempts (default
	// 2 s; grpc's exponential back-off from 100 ms, factor 1.6, jitter 0.2).
	MaxBackoff time.Duration
	// AbortTimeout bounds an Abort RPC (default 2 s).
	AbortTimeout time.Duration
	// DialOptions are appended to the session's own (tests).
	DialOptions []grpc.DialOption
}

// Session is one worker's connection and the calls in flight on it. Safe
// for concurrent use.
type Session struct {
	Conn   *grpc.ClientConn
	Worker string // the worker's URL, for errors

	ctx          context.Context
	cancel       context.CancelFunc
	calls        sync.WaitGroup // receive loops and abort goroutines
	closed       atomic.Bool
	closeOnce    sync.Once
	abortTimeout time.Duration
}

// Target returns HOST:PORT of a worker URL "scheme://HOST:PORT", or an
// error naming what is wrong with it.
func Target(scheme, url string) (string, error) {
	rest, ok := strings.CutPrefix(url, scheme+"://")
	if !ok {
		if strings.Contains(url, "://") {
			return "", errors.New("worker URL " + url + ": want " + scheme + "://HOST:PORT")
		}
		rest = url
	}
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" || strings.ContainsAny(rest, "/?#") || !strings.Contains(rest, ":") {
		return "", errors.New("worker URL " + url + ": want " + scheme + "://HOST:PORT")
	}
	return rest, nil
}

// Dial opens the session's connection to hostport and starts connecting
// at once (in the background: a worker that is down is not an error here;
// its calls fail fast with a retryable *remote.WorkerError until it is up,
// and grpc reconnects with back-off).
func Dial(worker, hostport string, o Options) (*Session, error) {
	if o.KeepaliveTime <= 0 {
		o.KeepaliveTime = 10 * time.Second
	}
	if o.KeepaliveTimeout <= 0 {
		o.KeepaliveTimeout = 2 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 2 * time.Second
	}
	if o.AbortTimeout <= 0 {
		o.AbortTimeout = 2 * time.Second
	}
	bo := backoff.DefaultConfig
	bo.MaxDelay = o.MaxBackoff
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: o.KeepaliveTime, Timeout: o.KeepaliveTimeout,
		}),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 2 * time.Second}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256 << 20)),
		grpc.WithDisableServiceConfig(),
	}
	opts = append(opts, o.DialOptions...)
	conn, err := grpc.NewClient("dns:///"+hostport, opts...)
	if err != nil {
		return nil, &remote.WorkerError{Worker: worker, Message: "dial", Err: err}
	}
	conn.Connect()
	ctx, cancel := context.WithCancel(context.Background())
	return &Session{Conn: conn, Worker: worker, ctx: ctx, cancel: cancel, abortTimeout: o.AbortTimeout}, nil
}

// Context is cancelled by Close.
func (s *Session) Context() context.Context { return s.ctx }

// Close cancels every call (each ends with an error), waits for their
// receive loops to have called End, and closes the connection. Idempotent.
// It must not be called from a Receiver's method.
func (s *Session) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.cancel()
		s.calls.Wait()
		err = s.Conn.Close()
	})
	return err
}

// Err maps a failed RPC to a *remote.WorkerError. delivered says whether
// any of the request's output reached the client (then it is never
// retryable).
func (s *Session) Err(what string, err error, delivered bool) *remote.WorkerError {
	if s.closed.Load() {
		return &remote.WorkerError{Worker: s.Worker, Message: what + ": the client was closed", Err: err}
	}
	st, _ := status.FromError(err)
	code := st.Code()
	e := &remote.WorkerError{Worker: s.Worker, Status: HTTPStatus(code), Message: what + ": " + code.String(), Err: err}
	switch code {
	case codes.Unavailable, codes.ResourceExhausted:
		e.Retryable = !delivered
	}
	return e
}

// HTTPStatus maps a gRPC code to the HTTP status of a WorkerError.
func HTTPStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.InvalidArgument, codes.OutOfRange, codes.FailedPrecondition:
		return http.StatusBadRequest
	case codes.NotFound:
		return http.StatusNotFound
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.Canceled:
		return 499
	}
	return http.StatusBadGateway
}
