// Package wsproto is the WebSocket protocol (RFC 6455) as netio's event
// loops need it: the opening handshake's key check and accept value, an
// incremental frame reader for client frames (masked, possibly fragmented,
// interleaved with control frames) and the writers of unmasked server
// frames. It knows nothing of sockets or gnet: the reader is fed whatever
// bytes are buffered and says how many it consumed, so partial frames wait
// in the caller's buffer for more.
//
// The reader enforces the rules a server must (§5.1-§5.6, §7.4, §8.1):
// client frames masked, no RSV bits (no extension is ever negotiated:
// permessage-deflate is declined), known opcodes, control frames short and
// final, continuation frames only inside a message, text valid UTF-8, a
// bound on the message size. Each breach is an *Error naming the close
// code to send. Binary messages are refused with 1003: the APIs served
// here speak JSON text.
package wsproto

import (
	"crypto/sha1"
	"encoding/base64"
	"strconv"
	"unicode/utf8"
)

// Opcodes (RFC 6455 §5.2, §11.8).
const (
	OpContinuation = 0x0
	OpText         = 0x1
	OpBinary       = 0x2
	OpClose        = 0x8
	OpPing         = 0x9
	OpPong         = 0xA
)

// Close status codes (RFC 6455 §7.4.1) Vajra sends.
const (
	CloseNormal          = 1000
	CloseGoingAway       = 1001
	CloseProtocolError   = 1002
	CloseUnsupportedData = 1003
	CloseNoStatus        = 1005 // never sent: "the close frame had no code"
	CloseInvalidPayload  = 1007
	ClosePolicyViolation = 1008
	CloseMessageTooBig   = 1009
	CloseInternalError   = 1011
)

// MaxControlPayload is the longest payload of a control frame (§5.5).
const MaxControlPayload = 125

// maxCloseReason is the longest close reason: a control payload less the
// two bytes of the code.
const maxCloseReason = MaxControlPayload - 2

// Error is a protocol breach by the client: the close code the server sends
// (§7.4.1) and a reason fit for the close frame (short, ASCII, never echoing
// client bytes).
type Error struct {
	Code   int
	Reason string
}

func (e *Error) Error() string {
	return "wsproto: " + e.Reason + " (close " + strconv.Itoa(e.Code) + ")"
}

// The breaches the reader reports. Each is one value, so a breach allocates
// nothing and callers compare with errors.Is or ==.
var (
	ErrUnmasked          = &Error{CloseProtocolError, "client frames must be masked"}
	ErrReservedBits      = &Error{CloseProtocolError, "reserved bits set but no extension was negotiated"}
	ErrOpcode            = &Error{CloseProtocolError, "unknown opcode"}
	ErrControlFragmented = &Error{CloseProtocolError, "control frames must not be fragmented"}
	ErrControlTooLong    = &Error{CloseProtocolError, "control frame payload over 125 bytes"}
	ErrContinuation      = &Error{CloseProtocolError, "continuation frame without a message to continue"}
	ErrInterleaved       = &Error{CloseProtocolError, "new data frame inside a fragmented message"}
	ErrLength            = &Error{CloseProtocolError, "payload length not in its minimal form or over 2^63"}
	ErrClosePayload      = &Error{CloseProtocolError, "close frame payload of one byte"}
	ErrCloseCode         = &Error{CloseProtocolError, "invalid close code"}
	ErrCloseReason       = &Error{CloseProtocolError, "close reason is not valid UTF-8"}
	ErrBinary            = &Error{CloseUnsupportedData, "binary messages are not supported: send JSON text"}
	ErrInvalidUTF8       = &Error{CloseInvalidPayload, "text message is not valid UTF-8"}
	ErrTooBig            = &Error{CloseMessageTooBig, "message over the server's maximum size"}
)

// ValidCloseCode reports whether code may appear in a close frame (§7.4):
// the codes defined for use in frames (1000-1003, 1007-1011, and 1012-1014,
// registered since in the IANA registry), and 3000-4999 (libraries and
// applications). 1004-1006 and 1015 are reserved for local use only.
func ValidCloseCode(code int) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1014:
		return true
	case code >= 3000 && code <= 4999:
		return true
	}
	return false
}

// CloseCode returns the code of a close frame's payload (which the reader
// validated), or CloseNoStatus for an empty payload.
func CloseCode(payload []byte) int {
	if len(payload) < 2 {
		return CloseNoStatus
	}
	return int(payload[0])<<8 | int(payload[1])
}

// AppendHeader appends the header of an unmasked server frame (§5.2) with
// a payload of n bytes: servers never mask (§5.1).
func AppendHeader(dst []byte, fin bool, op byte, n int) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	switch {
	case n < 126:
		return append(dst, b0, byte(n))
	case n <= 0xffff:
		return append(dst, b0, 126, byte(n>>8), byte(n))
	default:
		u := uint64(n)
		return append(dst, b0, 127,
			byte(u>>56), byte(u>>48), byte(u>>40), byte(u>>32),
			byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
	}
}

// AppendFrame appends one final, unmasked server frame.
func AppendFrame(dst []byte, op byte, payload []byte) []byte {
	dst = AppendHeader(dst, true, op, len(payload))
	return append(dst, payload...)
}

// AppendClose appends a close frame with code and reason. A reason longer
// than a control frame holds is cut at a UTF-8 boundary, one that is not
// UTF-8 is dropped, and an invalid code is sent as 1011: the caller's bug
// must not become the client's protocol error (§5.5.1, §7.4).
func AppendClose(dst []byte, code int, reason string) []byte {
	if !ValidCloseCode(code) {
		code = CloseInternalError
	}
	if !utf8.ValidString(reason) {
		reason = ""
	}
	if len(reason) > maxCloseReason {
		n := maxCloseReason
		for n > 0 && reason[n]&0xC0 == 0x80 { // a continuation byte: back to the rune's start
			n--
		}
		reason = reason[:n]
	}
	dst = AppendHeader(dst, true, OpClose, 2+len(reason))
	dst = append(dst, byte(code>>8), byte(code))
	return append(dst, reason...)
}

// keyGUID is the GUID the handshake appends to the client's key (§1.3).
const keyGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// ValidKey reports whether a Sec-WebSocket-Key value is the base64 encoding
// of 16 bytes, as §4.2.1 item 5 requires.
func ValidKey(key []byte) bool {
	if len(key) != 24 {
		return false
	}
	var raw [18]byte
	n, err := base64.StdEncoding.Strict().Decode(raw[:], key)
	return err == nil && n == 16
}

// AppendAccept appends the Sec-WebSocket-Accept value for key (§4.2.2 item
// 5.4): base64(SHA-1(key + GUID)).
func AppendAccept(dst, key []byte) []byte {
	h := sha1.New()
	h.Write(key)
	h.Write([]byte(keyGUID))
	var sum [sha1.Size]byte
	return base64.StdEncoding.AppendEncode(dst, h.Sum(sum[:0]))
}
