// Command artifacts runs the benchmark suite's artifacts workload
// (bench/baton.Artifacts: upload, verified download and re-upload of one
// large artifact, and an upload with 1 MiB changed in its middle) on its
// own, with the options a diagnosis needs: another size or number of
// uploads in flight, and CPU profiles of the client and every node during
// the upload. `make bench` runs the same workload in its report.
//
// It builds batond and starts three nodes on 127.0.0.1 with the normal
// Raft timings and the Go runtime's own GOMAXPROCS (cmd/batond/cluster).
//
// Usage (from the module root):
//
//	go run ./bench/artifacts --size 1GiB --pprof /tmp/prof
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/bench/baton"
	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/artifacts:", err)
		os.Exit(1)
	}
}

type options struct {
	size       int64
	seed       uint64
	parallel   int
	out        string
	keep       bool
	pprofDir   string // CPU profiles of the client and every node during the upload
	compress   string // the nodes' --chunk-compression ("": batond's default)
	pprofPorts []int  // the nodes' pprof ports, with pprofDir
	dir        string // the work directory: the cluster and the content files

	loadBefore string // from /proc/loadavg, to judge how quiet the machine was
}

func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("artifacts", flag.ContinueOnError)
	o := &options{}
	size := fs.String("size", "1GiB", "artifact size, e.g. 1GiB, 256MiB, 1000000")
	fs.Uint64Var(&o.seed, "seed", 42, "seed of the generated content")
	fs.IntVar(&o.parallel, "parallel", client.DefaultUploadParallel, "chunk uploads in flight")
	fs.StringVar(&o.out, "out", "", "also write the Markdown result to this file")
	fs.BoolVar(&o.keep, "keep", false, "keep the cluster's directory (printed) instead of deleting it")
	fs.StringVar(&o.compress, "chunk-compression", "", "the nodes' --chunk-compression (default: batond's, none)")
	fs.StringVar(&o.pprofDir, "pprof", "", "write CPU profiles of the client and of every node, taken during the first upload, to this directory")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	n, err := baton.ParseSize(*size)
	if err != nil {
		return nil, err
	}
	if n < 4<<20 {
		return nil, fmt.Errorf("--size must be at least 4MiB, got %d bytes", n)
	}
	o.size = n
	o.loadBefore = loadAverage()
	return o, nil
}

func run(args []string, stdout io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "baton-bench-artifacts-")
	if err != nil {
		return err
	}
	o.dir = dir
	if o.keep {
		fmt.Fprintln(os.Stderr, "cluster directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	logf("building batond")
	bin, err := cluster.BuildBatond(ctx, dir)
	if err != nil {
		return err
	}
	cfg := baton.EnvConfig{Binary: bin, BaseDir: filepath.Join(dir, "cluster"), Procs: cluster.ProcsRuntime}
	if o.compress != "" {
		cfg.ExtraArgs = []string{"--chunk-compression=" + o.compress}
	}
	if o.pprofDir != "" {
		if o.pprofPorts, err = cluster.FreePorts(3); err != nil {
			return err
		}
		cfg.Launch = func(i int, bin string, args []string) (string, []string) {
			return bin, append(args, fmt.Sprintf("--pprof-addr=127.0.0.1:%d", o.pprofPorts[i]))
		}
	}
	logf("starting three nodes (normal timings)")
	env, err := baton.StartEnv(ctx, cfg)
	if err != nil {
		return err
	}
	defer env.Close()
	p := baton.ArtifactParams{Size: o.size, Seed: o.seed, Parallel: o.parallel, Dir: dir, Logf: logf}
	if o.pprofDir != "" {
		p.ProfileUpload = func(ctx context.Context) (func(), error) { return startProfiles(ctx, o) }
	}
	r, err := baton.Artifacts(ctx, env, p)
	if err != nil {
		return err
	}
	report := markdown(o, r.Metrics, r.Notes)
	fmt.Fprint(stdout, report)
	if o.out != "" {
		return os.WriteFile(o.out, []byte(report), 0o644)
	}
	return nil
}

// startProfiles starts a CPU profile of this process and of every node
// (for 20 s, or until stop); stop writes them.
func startProfiles(ctx context.Context, o *options) (stop func(), err error) {
	if err := os.MkdirAll(o.pprofDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(o.pprofDir, "client-cpu.pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	for i, port := range o.pprofPorts {
		wg.Go(func() {
			url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=20", port)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				logf("pprof of n%d: %v", i+1, err)
				return
			}
			defer resp.Body.Close()
			out, err := os.Create(filepath.Join(o.pprofDir, fmt.Sprintf("n%d-cpu.pprof", i+1)))
			if err == nil {
				_, _ = io.Copy(out, resp.Body)
				out.Close()
			}
		})
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		wg.Wait()
		logf("profiles in %s", o.pprofDir)
	}, nil
}

// loadAverage is the 1-minute load average, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05")+" "+format+"\n", args...)
}

// markdown is the run's metrics, one row each, and its notes.
func markdown(o *options, metrics map[string]float64, notes []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Artifact transfer, %s, three local nodes\n\n", baton.HumanBytes(o.size))
	fmt.Fprintf(&b, "Command: `go run ./bench/artifacts %s`  \n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(&b, "Machine: %d CPUs, %s/%s, %s; %s; load average before the run %s.\n\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), time.Now().UTC().Format("2006-01-02"), o.loadBefore)
	b.WriteString("| metric | value |\n|---|---|\n")
	names := make([]string, 0, len(metrics))
	for k := range metrics {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "| %s | %.6g |\n", k, metrics[k])
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "\n%s\n", n)
	}
	return b.String()
}
