package actors

import "testing"

func TestBodyClasses(t *testing.T) {
	f := func(n, wantCap int) {
		t.Helper()
		r := NewRequest(EndpointChatCompletions, "id", make([]byte, n))
		if len(r.Body) != n || (wantCap > 0 && cap(r.Body) != wantCap) || (wantCap < 0 && r.buf != nil) {
			t.Fatalf("body of %d bytes: len %d cap %d pooled %v", n, len(r.Body), cap(r.Body), r.buf != nil)
		}
		r.release()
	}
	f(0, 512)
	f(1, 512)
	f(512, 512)
	f(513, 1024)
	f(700, 1024)
	f(4096, 4096)
	f(1<<20, 1<<20)
	f(1<<20+1, -1)
}
