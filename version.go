package vajra

import "runtime/debug"

// version is set at build time:
//
//	go build -ldflags "-X github.com/vajra-go/vajra.version=v1.2.3" ./cmd/vajra
//
// Without it, Version falls back to the module version Go recorded in the
// binary (a tagged `go install`), then to the VCS revision, then "dev".
var version string

// Version returns the server's version, as reported by GET /version.
func Version() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		return "dev-" + rev + dirty
	}
	return "dev"
}
