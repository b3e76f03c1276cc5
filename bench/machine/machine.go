// Package machine describes the machine a benchmark runs on: cores, CPU
// model, memory, kernel, the fsync latency of the filesystem that holds
// the data directories and the time of a fixed single-core computation,
// each measured the same way on every run (Fsync, CPU).
package machine

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/baton-dev/baton/bench/result"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

// FsyncTool names the probe in reports.
const FsyncTool = "bench/machine.Fsync: 1000 sequential 4 KiB appends to a new file opened O_DSYNC, 20 untimed first"

// CPUTool names the single-core probe in reports.
const CPUTool = "bench/machine.CPU: sorting 2^21 pseudo-random 64-bit integers (xorshift, a fixed seed) on one goroutine, the best of 3"

// CPU times CPUTool's computation. The work is the same on every run, so a
// core that runs slower (a busier host, a lower clock) shows here, as a
// slower disk shows in Fsync: runs of different days compare through it.
func CPU() time.Duration {
	xs := make([]uint64, 1<<21)
	best := time.Duration(1<<63 - 1)
	for range 3 {
		x := uint64(88172645463325252)
		for i := range xs {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			xs[i] = x
		}
		start := time.Now()
		slices.Sort(xs)
		best = min(best, time.Since(start))
	}
	return best
}

// Describe gathers the machine's details and probes fsync in dir.
func Describe(dir string) (result.Machine, error) {
	m := result.Machine{
		Cores:          runtime.NumCPU(),
		CPUModel:       cpuModel(),
		MemoryGiB:      memoryGiB(),
		Kernel:         readTrim("/proc/sys/kernel/osrelease"),
		GoVersion:      runtime.Version(),
		Filesystem:     filesystem(dir),
		FsyncTool:      FsyncTool,
		CPUTool:        CPUTool,
		LoadAvgAtStart: LoadAvg(),
		MemberProcs:    cluster.MemberProcs(cluster.DefaultNodes),
		DefaultProcs:   runtime.GOMAXPROCS(0),
	}
	if n, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil && n > 0 {
		m.DriverProcs = n
		m.MemberProcs = n // the pinned members inherit it
		// The default members do not; the runtime would give them the
		// usable cores (short of a container's CPU limit, which Go 1.25
		// and later also follow).
		m.DefaultProcs = runtime.NumCPU()
	}
	lat, err := Fsync(dir, 1000)
	if err != nil {
		return m, err
	}
	m.FsyncP50US = micros(lat[len(lat)/2])
	m.FsyncP99US = micros(lat[len(lat)*99/100])
	m.CPUStartMS = CPUMillis()
	return m, nil
}

// Fsync measures n 4 KiB writes, each durable before it returns (O_DSYNC),
// appended to a fresh file in dir, and returns their latencies sorted.
func Fsync(dir string, n int) ([]time.Duration, error) {
	f, err := os.CreateTemp(dir, "fsync-probe-*")
	if err != nil {
		return nil, err
	}
	path := f.Name()
	f.Close()
	defer os.Remove(path)
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|syscall.O_DSYNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	const untimed = 20
	lat := make([]time.Duration, 0, n)
	for i := range n + untimed {
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			return nil, fmt.Errorf("fsync probe: %w", err)
		}
		if i >= untimed {
			lat = append(lat, time.Since(t0))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat, nil
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// CPUMillis is CPU's time in milliseconds, as the report records it.
func CPUMillis() float64 { return millis(CPU()) }

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func memoryGiB() float64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb float64
		if _, err := fmt.Sscanf(sc.Text(), "MemTotal: %f kB", &kb); err == nil {
			return kb / (1 << 20)
		}
	}
	return 0
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// filesystem returns the type and device of the mount holding dir, from
// /proc/mounts (the longest mount point that is a prefix of dir).
func filesystem(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	data, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return ""
	}
	best, bestLen := "", -1
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		mp := f[1]
		if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > bestLen {
			best, bestLen = f[2]+" on "+f[0], len(mp)
		}
	}
	return best
}

// Version runs `bin args...` and returns its first output line, or "" when
// it cannot run.
func Version(bin string, args ...string) string {
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line)
}

// DirSize is the total size of the regular files under dir.
func DirSize(dir string) int64 {
	var total int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			total += info.Size()
		}
		return nil
	})
	return total
}

// LoadAvg is the one-minute load average, from /proc/loadavg; 0 when
// unknown.
func LoadAvg() float64 {
	var v float64
	_, _ = fmt.Sscanf(readTrim("/proc/loadavg"), "%f", &v)
	return v
}
