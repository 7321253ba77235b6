package llama

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestDefaultLibDirsPreferNativeBuild: wherever the search looks, the
// native build of `make llama-server` comes before the prebuilt libraries
// of `make llama`, and $VAJRA_LLAMA_LIB before both.
func TestDefaultLibDirsPreferNativeBuild(t *testing.T) {
	t.Setenv("VAJRA_LLAMA_LIB", "/opt/llama")
	dirs := DefaultLibDirs()
	if dirs[0] != "/opt/llama" {
		t.Fatalf("first dir %q, want $VAJRA_LLAMA_LIB", dirs[0])
	}
	native, prebuilt := filepath.Join(".llama", "server", "bin"), filepath.Join(".llama", "linux-x64")
	if !slices.Contains(dirs, native) || !slices.Contains(dirs, prebuilt) {
		t.Fatalf("dirs %q lack %s or %s", dirs, native, prebuilt)
	}
	for i, d := range dirs {
		if filepath.Base(filepath.Dir(d)) == ".llama" && filepath.Base(d) == "linux-x64" {
			want := filepath.Join(filepath.Dir(d), "server", "bin")
			if i == 0 || dirs[i-1] != want {
				t.Errorf("%s is not preceded by %s: %q", d, want, dirs)
			}
		}
	}
}
