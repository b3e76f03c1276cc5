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

func TestBusyShare(t *testing.T) {
	a := []uint64{100, 0, 50, 1000, 10, 0, 0, 0}
	b := []uint64{130, 0, 60, 1050, 20, 0, 0, 0} // 30+10 busy, 50 idle, 10 iowait
	if got := busyShare(a, b); got != 50.0/100 {
		t.Fatalf("busyShare: got %v, want 0.5 (iowait counts as busy)", got)
	}
	if got := busyShare(a, a); got != 0 {
		t.Fatalf("busyShare of no time: got %v, want 0", got)
	}
	if ts, ok := cpuTimes(); !ok || len(ts) < 4 {
		t.Fatalf("cpuTimes: got %v, %v", ts, ok)
	}
}
