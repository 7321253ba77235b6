package llama

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDefaultLibDirsNativeBuildOnly: wherever the search looks, it looks
// for the native build of `make llama` (.llama/server/bin), after
// $VAJRA_LLAMA_LIB, and never for node-llama-cpp's prebuilt libraries
// (`make llama-prebuilt`, .llama/linux-x64), whose CPU variants change
// greedy answers on Q4_1 models (TestRealModelAnswers): they load only when
// named.
func TestDefaultLibDirsNativeBuildOnly(t *testing.T) {
	t.Setenv("VAJRA_LLAMA_LIB", "/opt/llama")
	dirs := DefaultLibDirs()
	if dirs[0] != "/opt/llama" {
		t.Fatalf("first dir %q, want $VAJRA_LLAMA_LIB", dirs[0])
	}
	native := filepath.Join(".llama", "server", "bin")
	if !slices.Contains(dirs, native) {
		t.Fatalf("dirs %q lack %s", dirs, native)
	}
	for _, d := range dirs[1:] {
		if !strings.HasSuffix(d, native) {
			t.Errorf("the search looks in %s, which is not a native build's directory", d)
		}
	}
}
