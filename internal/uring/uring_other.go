//go:build !linux

package uring

import "errors"

// Completion is the result of one send (see the Linux implementation).
type Completion struct {
	Tag uint64
	Res int32
}

// Ring is unavailable off Linux.
type Ring struct{}

var errUnsupported = errors.New("uring: io_uring is Linux-only")

// ErrFull is returned by Send when the submission queue is full.
var ErrFull = errors.New("uring: submission queue full")

func New(uint32) (*Ring, error)                             { return nil, errUnsupported }
func Probe() error                                          { return errUnsupported }
func (*Ring) Entries() int                                  { return 0 }
func (*Ring) Queued() int                                   { return 0 }
func (*Ring) Send(int, []byte, uint64) error                { return errUnsupported }
func (*Ring) Submit(dst []Completion) ([]Completion, error) { return dst, errUnsupported }
func (*Ring) Close() error                                  { return nil }
