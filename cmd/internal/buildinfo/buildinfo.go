// Package buildinfo says which build of Baton a binary is: its version (set
// by `make build` from git, or "dev"), the commit it was built from and the
// Go version, from the build information the Go toolchain embeds.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// version is set at link time: -ldflags "-X .../buildinfo.version=v1.2.3".
var version = "dev"

// Info is a build's identity.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"` // "" when not built from a git checkout
	GoVersion string `json:"go_version"`
}

// Get returns this binary's build information.
func Get() Info {
	in := Info{Version: version}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	in.GoVersion = bi.GoVersion
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && in.Commit != "" {
		in.Commit += "-dirty"
	}
	return in
}

// String is one line: "baton v1.2.3 (commit 0123abcd, go1.26.8)".
func (in Info) String() string {
	commit, dirty := strings.CutSuffix(in.Commit, "-dirty")
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if dirty {
		commit += "-dirty"
	}
	if commit == "" {
		commit = "unknown"
	}
	return fmt.Sprintf("%s (commit %s, %s)", in.Version, commit, in.GoVersion)
}
