package netio

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"

	"github.com/vajra-go/vajra/httpparse"
)

// keySet holds the SHA-256 digests of the accepted API keys. A presented
// key is hashed and compared with every digest in constant time, so neither
// a key's length nor its matching prefix shows in the timing.
type keySet struct {
	digests [][sha256.Size]byte
}

func newKeySet(keys []string) keySet {
	var ks keySet
	for _, k := range keys {
		if k != "" {
			ks.digests = append(ks.digests, sha256.Sum256([]byte(k)))
		}
	}
	return ks
}

// allowed reports whether req carries an accepted key, in
// "Authorization: Bearer KEY" (OpenAI SDKs, Anthropic SDKs v2) or
// "x-api-key: KEY" (older Anthropic SDKs). With no keys configured every
// request is allowed.
func (ks *keySet) allowed(req *httpparse.Request) bool {
	if len(ks.digests) == 0 {
		return true
	}
	if v := req.Header("authorization"); len(v) > 7 && bytes.EqualFold(v[:7], []byte("bearer ")) {
		if ks.match(bytes.TrimLeft(v[7:], " ")) {
			return true
		}
	}
	if v := req.Header("x-api-key"); len(v) > 0 {
		return ks.match(v)
	}
	return false
}

// allowedSubprotocol reports whether a WebSocket handshake carries an
// accepted key in the browser form of the Realtime API, a
// Sec-WebSocket-Protocol token "openai-insecure-api-key.KEY" (browsers
// cannot set Authorization on a WebSocket).
func (ks *keySet) allowedSubprotocol(req *httpparse.Request) bool {
	if len(ks.digests) == 0 {
		return true
	}
	key := subprotocolsOf(req).key
	return len(key) > 0 && ks.match(key)
}

func (ks *keySet) match(key []byte) bool {
	d := sha256.Sum256(key)
	ok := 0
	for i := range ks.digests {
		ok |= subtle.ConstantTimeCompare(d[:], ks.digests[i][:])
	}
	return ok == 1
}
