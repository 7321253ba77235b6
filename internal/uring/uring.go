//go:build linux

// Package uring submits socket sends in batches through io_uring: one
// io_uring_enter(2) carries the sends of many connections, where write(2)
// takes one system call each.
//
// It is the part of io_uring that an event loop writing to many non-blocking
// sockets needs, and no more: a submission queue of IORING_OP_SEND entries,
// each flagged MSG_DONTWAIT so that a full socket buffer completes at once
// with a short count or -EAGAIN (the caller hands the rest to its ordinary
// write path) instead of being parked inside the kernel, and a completion
// queue reaped in the same call. Every send of a batch has completed when
// Submit returns, so a caller that owns a socket's writes keeps owning them:
// nothing is in flight between two batches.
//
// The pure-Go ports of liburing were tried first: github.com/pawelgaczynski/giouring
// does not link with Go 1.23 and later (it reaches syscall.munmap through a
// go:linkname the linker now refuses). The kernel interface used here is small
// and stable (Linux 5.6 and later); it is written against
// include/uapi/linux/io_uring.h.
//
// A Ring is not safe for concurrent use: one event loop owns it.
package uring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel constants (include/uapi/linux/io_uring.h).
const (
	opSend = 26 // IORING_OP_SEND

	setupClamp       = 1 << 4 // IORING_SETUP_CLAMP
	setupSubmitAll   = 1 << 7 // IORING_SETUP_SUBMIT_ALL
	setupCoopTaskrun = 1 << 8 // IORING_SETUP_COOP_TASKRUN

	featSingleMmap = 1 << 0 // IORING_FEAT_SINGLE_MMAP

	enterGetEvents = 1 << 0 // IORING_ENTER_GETEVENTS

	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000

	// sendFlags: a full socket buffer completes the send at once (short
	// count or -EAGAIN) rather than arming a poll in the kernel, and a
	// closed peer is an EPIPE result, not a signal.
	sendFlags = unix.MSG_DONTWAIT | unix.MSG_NOSIGNAL
)

// sqringOffsets is struct io_sqring_offsets.
type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// cqringOffsets is struct io_cqring_offsets.
type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// params is struct io_uring_params.
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// sqe is struct io_uring_sqe (64 bytes).
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	opFlags     uint32 // msg_flags for a send
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	pad         uint64
}

// cqe is struct io_uring_cqe (16 bytes, without IORING_SETUP_CQE32).
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// Completion is the result of one send: Res is the count of bytes sent, or
// a negated errno (-EAGAIN: nothing fitted in the socket buffer).
type Completion struct {
	Tag uint64
	Res int32
}

// Ring is one io_uring instance. The zero value is not usable: see New.
type Ring struct {
	fd int
	// ring is the shared SQ and CQ ring mapping; sqeMem the SQE array's.
	ring, sqeMem []byte

	sqHead, sqTail *uint32
	sqMask         uint32
	sqes           []sqe
	entries        uint32

	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           []cqe

	// queued counts entries written since the last Submit; their buffers
	// must stay reachable (the caller holds them) until Submit returns.
	queued uint32
}

// ErrFull is returned by Send when the submission queue holds Entries sends.
var ErrFull = errors.New("uring: submission queue full")

// New sets up a ring for up to entries sends per batch (rounded up to a
// power of two by the kernel, and clamped to its maximum).
func New(entries uint32) (*Ring, error) {
	// COOP_TASKRUN (5.19) spares the loop's thread interrupts for task
	// work it does not need (every send completes inline); SUBMIT_ALL
	// (5.18) keeps submitting past an entry that fails. Older kernels
	// refuse unknown flags with EINVAL: retry with only CLAMP.
	p := params{flags: setupClamp | setupSubmitAll | setupCoopTaskrun}
	fd, err := setup(entries, &p)
	if err == unix.EINVAL {
		p = params{flags: setupClamp}
		fd, err = setup(entries, &p)
	}
	if err != nil {
		return nil, fmt.Errorf("uring: io_uring_setup: %w", err)
	}
	r := &Ring{fd: fd}
	if err := r.mmap(&p); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	return r, nil
}

func setup(entries uint32, p *params) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// mmap maps the rings the kernel described in p.
func (r *Ring) mmap(p *params) error {
	if p.features&featSingleMmap == 0 {
		// Every kernel since 5.4 maps both rings at once; 5.6 is needed
		// for IORING_OP_SEND anyway.
		return errors.New("uring: kernel too old (no IORING_FEAT_SINGLE_MMAP)")
	}
	size := p.sqOff.array + p.sqEntries*4
	if cq := p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(cqe{})); cq > size {
		size = cq
	}
	ring, err := unix.Mmap(r.fd, offSQRing, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("uring: mmap rings: %w", err)
	}
	sqeMem, err := unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		_ = unix.Munmap(ring)
		return fmt.Errorf("uring: mmap entries: %w", err)
	}
	r.ring, r.sqeMem = ring, sqeMem
	r.sqHead = (*uint32)(unsafe.Pointer(&ring[p.sqOff.head]))
	r.sqTail = (*uint32)(unsafe.Pointer(&ring[p.sqOff.tail]))
	r.sqMask = *(*uint32)(unsafe.Pointer(&ring[p.sqOff.ringMask]))
	r.entries = p.sqEntries
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&sqeMem[0])), p.sqEntries)
	// The index array maps ring slots to entries: the identity, set once.
	array := unsafe.Slice((*uint32)(unsafe.Pointer(&ring[p.sqOff.array])), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.cqHead = (*uint32)(unsafe.Pointer(&ring[p.cqOff.head]))
	r.cqTail = (*uint32)(unsafe.Pointer(&ring[p.cqOff.tail]))
	r.cqMask = *(*uint32)(unsafe.Pointer(&ring[p.cqOff.ringMask]))
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&ring[p.cqOff.cqes])), p.cqEntries)
	return nil
}

// Entries is the most sends one batch holds.
func (r *Ring) Entries() int { return int(r.entries) }

// Queued is the number of sends waiting for Submit.
func (r *Ring) Queued() int { return int(r.queued) }

// Send queues a send of b (non-empty) on the socket fd, tagged tag. b must
// stay unchanged and reachable until Submit returns.
func (r *Ring) Send(fd int, b []byte, tag uint64) error {
	if r.queued == r.entries {
		return ErrFull
	}
	tail := *r.sqTail + r.queued // only this goroutine moves the tail
	e := &r.sqes[tail&r.sqMask]
	*e = sqe{
		opcode:   opSend,
		fd:       int32(fd),
		addr:     uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))),
		len:      uint32(len(b)),
		opFlags:  sendFlags,
		userData: tag,
	}
	r.queued++
	return nil
}

// Submit hands every queued send to the kernel with one io_uring_enter(2)
// (more only if interrupted) and waits until all have completed, appending
// their results to dst in completion order. On an error, sends submitted
// before it may have completed: their results are in the returned slice,
// and the caller must treat every send without a result as not sent and
// close the Ring (which drops what the kernel did not take).
func (r *Ring) Submit(dst []Completion) ([]Completion, error) {
	n := r.queued
	if n == 0 {
		return dst, nil
	}
	// Publish the entries: the kernel reads the tail with acquire order.
	atomic.StoreUint32(r.sqTail, *r.sqTail+n)
	r.queued = 0
	submitted, done := uint32(0), uint32(0)
	for done < n {
		toSubmit := n - submitted
		ret, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(n-done), enterGetEvents, 0, 0)
		if errno == unix.EINTR {
			dst, done = r.reap(dst, done)
			continue
		}
		if errno != 0 {
			dst, _ = r.reap(dst, done)
			return dst, fmt.Errorf("uring: io_uring_enter: %w", errno)
		}
		submitted += uint32(ret)
		dst, done = r.reap(dst, done)
		if submitted < n && ret == 0 {
			// The kernel took none of what is left and said no error:
			// never expected, but a loop here would spin.
			return dst, errors.New("uring: io_uring_enter submitted nothing")
		}
	}
	return dst, nil
}

// reap appends the completions posted so far to dst.
func (r *Ring) reap(dst []Completion, done uint32) ([]Completion, uint32) {
	head := *r.cqHead
	tail := atomic.LoadUint32(r.cqTail)
	for ; head != tail; head++ {
		e := &r.cqes[head&r.cqMask]
		dst = append(dst, Completion{Tag: e.userData, Res: e.res})
		done++
	}
	atomic.StoreUint32(r.cqHead, head)
	return dst, done
}

// Close releases the ring. Sends queued and not submitted are dropped.
func (r *Ring) Close() error {
	if r.fd < 0 {
		return nil
	}
	_ = unix.Munmap(r.sqeMem)
	_ = unix.Munmap(r.ring)
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// Probe reports whether batched sends work here: it sets up a ring and
// sends a byte over a socket pair through it, so that a kernel without
// io_uring, one that disables it (kernel.io_uring_disabled) or a seccomp
// filter that refuses its system calls all show as an error.
func Probe() error {
	r, err := New(2)
	if err != nil {
		return err
	}
	defer r.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("uring: probe: %w", err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	msg := []byte{'v'}
	if err := r.Send(fds[0], msg, 7); err != nil {
		return err
	}
	var buf [1]Completion
	res, err := r.Submit(buf[:0])
	if err != nil {
		return err
	}
	if len(res) != 1 || res[0].Tag != 7 || res[0].Res != 1 {
		return fmt.Errorf("uring: probe: send completed as %+v, want 1 byte", res)
	}
	var got [1]byte
	if n, err := unix.Read(fds[1], got[:]); n != 1 || err != nil || got[0] != 'v' {
		return fmt.Errorf("uring: probe: peer read %d bytes (%v)", n, err)
	}
	return nil
}
