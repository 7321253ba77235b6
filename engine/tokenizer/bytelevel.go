package tokenizer

// GPT-2's byte-level alphabet (bytes_to_unicode in the GPT-2 and Hugging
// Face sources): each byte maps to one printable rune, the printable Latin-1
// bytes to themselves and the others to U+0100 onwards. Byte-level
// vocabularies spell tokens in this alphabet ("Ġthe" is " the").
var byteToRune, runeToByte = func() (b2r [256]rune, r2b map[rune]byte) {
	r2b = make(map[rune]byte, 256)
	n := 0
	for b := range 256 {
		if ('!' <= b && b <= '~') || (0xa1 <= b && b <= 0xac) || (0xae <= b && b <= 0xff) {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
		r2b[b2r[b]] = byte(b)
	}
	return b2r, r2b
}()

// byteLevelDecode returns the bytes that the byte-level spelling s stands
// for, and false when s has a rune outside the alphabet (Hugging Face's
// ByteLevel decoder then keeps the token's UTF-8 bytes as they are).
func byteLevelDecode(dst []byte, s string) ([]byte, bool) {
	n := len(dst)
	for _, r := range s {
		b, ok := runeToByte[r]
		if !ok {
			return dst[:n], false
		}
		dst = append(dst, b)
	}
	return dst, true
}
