package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	in := Get()
	if in.Version == "" || in.GoVersion != runtime.Version() {
		t.Errorf("Get() = %+v; want a version and this toolchain's Go version %s", in, runtime.Version())
	}
	if s := in.String(); !strings.Contains(s, in.Version) || !strings.Contains(s, runtime.Version()) {
		t.Errorf("String() = %q", s)
	}
}
