package codegen

import "unsafe"

// unsafeBytes returns the bytes of s without copying. The result shares s's
// memory and must never be written.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
