package machine

import "testing"

func TestDescribe(t *testing.T) {
	m, err := Describe(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if m.Cores < 1 || m.FsyncP50US <= 0 || m.FsyncP99US < m.FsyncP50US || m.CPUStartMS <= 0 || m.CPUTool == "" {
		t.Fatalf("got %+v, want cores >= 1, 0 < fsync p50 <= p99 and the CPU probe's time", m)
	}
	t.Logf("%+v", m)
}
