package httpparse

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// reqCopy is a Request with its slices copied out, comparable with ==
// semantics via reflect.DeepEqual.
type reqCopy struct {
	Method, Target, Path string
	Query                string
	HasQuery             bool
	Authority            string
	Minor                int
	Headers, Trailers    [][2]string
	Host                 string
	HasHost              bool
	ContentType          string
	ContentLength        int64
	Chunked              bool
	KeepAlive            bool
	Expect100            bool
	Upgrade              string
	Body                 string
	N                    int // bytes consumed
}

func copyReq(r *Request, n int) reqCopy {
	c := reqCopy{
		Method: string(r.Method), Target: string(r.Target), Path: string(r.Path),
		Query: string(r.Query), HasQuery: r.Query != nil, Authority: string(r.Authority),
		Minor: r.Minor, Host: string(r.Host), HasHost: r.Host != nil,
		ContentType: string(r.ContentType), ContentLength: r.ContentLength,
		Chunked: r.Chunked, KeepAlive: r.KeepAlive, Expect100: r.Expect100,
		Upgrade: string(r.Upgrade), Body: string(r.Body), N: n,
	}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, [2]string{string(h.Name), string(h.Value)})
	}
	for _, h := range r.Trailers {
		c.Trailers = append(c.Trailers, [2]string{string(h.Name), string(h.Value)})
	}
	return c
}

// outcome is everything a connection observes while feeding one input:
// the requests parsed, then how it ended.
type outcome struct {
	Reqs     []reqCopy
	Err      error // sentinel, nil if none
	Status   int
	Offset   int  // error offset from the start of the input
	Upgraded bool // stopped at a request with Upgrade set
	Pending  int  // unconsumed bytes when the input ran out (need more)
}

func (o outcome) String() string {
	var b strings.Builder
	for _, r := range o.Reqs {
		fmt.Fprintf(&b, "%+v\n", r)
	}
	fmt.Fprintf(&b, "err=%v status=%d off=%d upgraded=%v pending=%d", o.Err, o.Status, o.Offset, o.Upgraded, o.Pending)
	return b.String()
}

// run feeds in to a fresh Parser as a connection would, delivering the
// bytes in pieces ending at the given cut offsets (then the rest). Each
// Parse call gets a fresh copy of the unconsumed bytes, so a parser that
// kept pointers into an old buffer would be caught.
func run(p *Parser, in []byte, cuts ...int) outcome {
	var o outcome
	var req Request
	consumed := 0
	avail := 0
	ends := append(append([]int(nil), cuts...), len(in))
	for _, end := range ends {
		if end <= avail || end > len(in) {
			continue
		}
		avail = end
		for consumed < avail {
			buf := append([]byte(nil), in[consumed:avail]...)
			n, err := p.Parse(buf, &req)
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					panic("not an *Error: " + err.Error())
				}
				o.Err, o.Status, o.Offset = e.Err, e.Status, consumed+e.Offset
				return o
			}
			if n == 0 {
				break
			}
			o.Reqs = append(o.Reqs, copyReq(&req, n))
			consumed += n
			if req.Upgrade != nil {
				o.Upgraded = true
				o.Pending = len(in) - consumed
				return o
			}
		}
	}
	o.Pending = len(in) - consumed
	return o
}

// runSplits checks that in gives the same outcome whole, split in two at
// every offset, and fed one byte at a time (the nats-server habit), and
// returns the whole-input outcome. Error offsets may differ by piece
// boundaries only in where the error is noticed, so they are compared too:
// the parser must notice at the same byte.
func runSplits(t *testing.T, newP func() *Parser, in []byte) outcome {
	t.Helper()
	want := run(newP(), in)
	for k := 1; k < len(in); k++ {
		if got := run(newP(), in, k); !reflect.DeepEqual(got, want) {
			t.Fatalf("split at %d of %q:\n got %v\nwant %v", k, in, got, want)
		}
	}
	if len(in) <= 4096 {
		cuts := make([]int, len(in))
		for k := range cuts {
			cuts[k] = k + 1
		}
		if got := run(newP(), in, cuts...); !reflect.DeepEqual(got, want) {
			t.Fatalf("byte at a time %q:\n got %v\nwant %v", in, got, want)
		}
	}
	return want
}

func defaultParser() *Parser { return NewParser(Limits{}) }
