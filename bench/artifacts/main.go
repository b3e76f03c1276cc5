// Command artifacts measures artifact transfer on a local three-node
// cluster: upload and download throughput of one large artifact, what a
// re-upload of the same content sends, and what an upload after changing
// 1 MiB in its middle sends.
//
// It builds batond, starts three nodes on 127.0.0.1 with the normal Raft
// timings and the Go runtime's own GOMAXPROCS (cmd/batond/cluster), writes
// a deterministic, compressible, text-like content generated from a seed
// to a file (untimed), and uploads that file as `baton artifact put` does:
// the content is never held in memory, on either side.
//
// Usage (from the module root):
//
//	go run ./bench/artifacts --size 1GiB --out bench-artifacts.md
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

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
	fs.StringVar(&o.pprofDir, "pprof", "", "write CPU profiles of the client and of every node, taken during the first upload, to this directory")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	n, err := parseSize(*size)
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

// parseSize reads "1GiB", "512MiB", "64KiB", "1GB", "10MB" or plain bytes.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || v <= 0 {
				return 0, fmt.Errorf("bad size %q", s)
			}
			return int64(v * float64(u.mult)), nil
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v, nil
}

// result is one row of the table.
type result struct{ what, value, note string }

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
	cfg := cluster.Config{Binary: bin, Nodes: 3, BaseDir: filepath.Join(dir, "cluster"), Procs: cluster.ProcsRuntime}
	if o.pprofDir != "" {
		if o.pprofPorts, err = cluster.FreePorts(3); err != nil {
			return err
		}
		cfg.Launch = func(i int, bin string, args []string) (string, []string) {
			return bin, append(args, fmt.Sprintf("--pprof-addr=127.0.0.1:%d", o.pprofPorts[i]))
		}
	}
	c, err := cluster.New(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	logf("starting three nodes (normal timings)")
	if err := c.Start(ctx); err != nil {
		return err
	}
	if err := waitAddresses(ctx, c); err != nil {
		return err
	}
	cl, err := client.New(client.Config{Endpoints: c.Endpoints(), Token: c.AdminToken(), Timeout: 30 * time.Second, MaxRetry: time.Minute})
	if err != nil {
		return err
	}
	rows, err := measure(ctx, cl, c, o)
	if err != nil {
		return err
	}
	report := markdown(o, rows)
	fmt.Fprint(stdout, report)
	if o.out != "" {
		return os.WriteFile(o.out, []byte(report), 0o644)
	}
	return nil
}

// waitAddresses waits until every node knows every member's HTTP address:
// chunk copies go to peers by that address.
func waitAddresses(ctx context.Context, c *cluster.Cluster) error {
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < c.Size(); {
		st, err := c.Status(ctx, i)
		known := 0
		if err == nil {
			for _, m := range st.Members {
				if m.HTTPAddr != "" {
					known++
				}
			}
		}
		if known == c.Size() {
			i++
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s knows %d of %d member addresses after 30s (err %v)", c.ID(i), known, c.Size(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

func measure(ctx context.Context, cl *client.Client, c *cluster.Cluster, o *options) ([]result, error) {
	const tenant, name = "bench", "corpus"
	if _, err := cl.PutTenant(ctx, tenant); err != nil {
		return nil, err
	}
	mb := func(n int64, d time.Duration) string { return fmt.Sprintf("%.1f MB/s", float64(n)/1e6/d.Seconds()) }
	var rows []result

	// The content goes to files first, outside the timings: the upload
	// reads a file, as `baton artifact put` does, and the generator's own
	// CPU (as much as the upload's hashing) stays out of the figures.
	logf("writing the content files")
	base, err := writeContent(o, "content", -1)
	if err != nil {
		return nil, err
	}
	changed, err := writeContent(o, "content-changed", o.size/2)
	if err != nil {
		return nil, err
	}

	// 1. Upload.
	logf("uploading %s", human(o.size))
	stopProfiles, err := startProfiles(ctx, o)
	if err != nil {
		return nil, err
	}
	up, err := upload(ctx, cl, tenant, name, base, o)
	stopProfiles()
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	rows = append(rows,
		result{"upload", mb(o.size, up.stats.Elapsed), fmt.Sprintf("%s in %s, %d chunks (avg %s); chunks settled in %s, publish (server re-reads and verifies) %s",
			human(o.size), dur(up.stats.Elapsed), up.stats.Chunks, human(o.size/int64(up.stats.Chunks)), dur(up.settled), dur(up.stats.Elapsed-up.settled))})

	// 2. Download, digest verified by the client.
	logf("downloading")
	start := time.Now()
	n, err := cl.DownloadArtifact(ctx, tenant, name, up.m.Version, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	took := time.Since(start)
	rows = append(rows, result{"download (size and SHA-256 verified)", mb(n, took), fmt.Sprintf("%s in %s, from the leader", human(n), dur(took))})

	// 3. The same content again.
	logf("re-uploading unchanged")
	again, err := upload(ctx, cl, tenant, name, base, o)
	if err != nil {
		return nil, fmt.Errorf("re-upload: %w", err)
	}
	pct := 100 * float64(again.stats.BytesSent) / float64(o.size)
	rows = append(rows, result{"re-upload unchanged", mb(o.size, again.stats.Elapsed),
		fmt.Sprintf("%s in %s; bytes sent %d (%.3f%%, goal < 1%%); %d of %d chunks sent; version %d again (same artifact_id: %v)",
			human(o.size), dur(again.stats.Elapsed), again.stats.BytesSent, pct, again.stats.ChunksUploaded, again.stats.Chunks, again.m.Version, again.m.ArtifactID == up.m.ArtifactID)})

	// 4. 1 MiB changed in the middle.
	logf("uploading with 1 MiB changed in the middle")
	patched, err := upload(ctx, cl, tenant, name, changed, o)
	if err != nil {
		return nil, fmt.Errorf("patched upload: %w", err)
	}
	rows = append(rows, result{"1 MiB changed in the middle: sent", fmt.Sprintf("%d chunks, %s", patched.stats.ChunksUploaded, human(patched.stats.BytesSent)),
		fmt.Sprintf("goal: a few chunks; of %d chunks; version %d; %s", patched.stats.Chunks, patched.m.Version, dur(patched.stats.Elapsed))})

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rows = append(rows, result{"client memory", human(int64(ms.Sys)) + " from the Go runtime", "peak RSS " + peakRSS() + " (the content is streamed, never held)"})
	for i := range c.Size() {
		rows = append(rows, result{"chunk store on " + c.ID(i), human(diskUsage(filepath.Join(c.DataDir(i), "chunks"))),
			"zstd (fastest) where smaller; both versions' chunks"})
	}
	return rows, nil
}

// startProfiles starts a CPU profile of this process and of every node
// (for 20 s, or until stop) when --pprof is given; stop writes them.
func startProfiles(ctx context.Context, o *options) (stop func(), err error) {
	if o.pprofDir == "" {
		return func() {}, nil
	}
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

type uploaded struct {
	m       *client.Manifest
	stats   client.UploadStats
	settled time.Duration // until every chunk was held by the cluster
}

// writeContent writes the generated content (see newText) to a file of
// the work directory and returns its path.
func writeContent(o *options, name string, patchAt int64) (string, error) {
	path := filepath.Join(o.dir, name)
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if _, err := io.CopyBuffer(f, newText(o.seed, o.size, patchAt), make([]byte, 1<<20)); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

func upload(ctx context.Context, cl *client.Client, tenant, name, path string, o *options) (*uploaded, error) {
	r, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	u := &uploaded{}
	start := time.Now()
	next := int64(0)
	m, err := cl.UploadArtifact(ctx, tenant, name, r, client.UploadOptions{MediaType: "text/plain", Parallel: o.parallel,
		Size: o.size, Stats: &u.stats, Progress: func(done, total int64) {
			if done >= next {
				logf("  %5.1f%%  %s", 100*float64(done)/float64(total), human(done))
				next += total / 10
			}
			if done == total {
				u.settled = time.Since(start)
			}
		}})
	if err != nil {
		return nil, err
	}
	u.m = m
	return u, nil
}

// text streams n bytes of text-like content: words from a vocabulary drawn
// from seed, with punctuation and line breaks. With patchAt >= 0, the 1 MiB
// from patchAt on comes from another seed instead (the same length).
type text struct {
	rng, patch *textGen
	n, pos     int64
	patchAt    int64
}

func newText(seed uint64, n, patchAt int64) *text {
	return &text{rng: newTextGen(seed, seed), patch: newTextGen(seed+1, seed^0xfeed), n: n, patchAt: patchAt}
}

const patchSize = 1 << 20

func (t *text) Read(p []byte) (int, error) {
	if t.pos >= t.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), t.n-t.pos)]
	t.rng.fill(p)
	if t.patchAt >= 0 {
		lo, hi := max(t.pos, t.patchAt), min(t.pos+int64(len(p)), t.patchAt+patchSize)
		if lo < hi {
			t.patch.fill(p[lo-t.pos : hi-t.pos])
		}
	}
	t.pos += int64(len(p))
	return len(p), nil
}

// textGen emits words without end; fill continues where the last one
// stopped, so the stream does not depend on how it is read.
type textGen struct {
	rng     *rand.Rand
	words   [][]byte
	buf     []byte // the rest of the current word
	scratch []byte
}

func newTextGen(vocabSeed, streamSeed uint64) *textGen {
	v := rand.New(rand.NewPCG(vocabSeed, 1))
	words := make([][]byte, 4096)
	for i := range words {
		w := make([]byte, 2+v.IntN(9))
		for j := range w {
			w[j] = 'a' + byte(v.IntN(26))
		}
		words[i] = w
	}
	return &textGen{rng: rand.New(rand.NewPCG(streamSeed, 2)), words: words}
}

func (g *textGen) fill(p []byte) {
	for len(p) > 0 {
		if len(g.buf) == 0 {
			g.buf = g.nextWord()
		}
		n := copy(p, g.buf)
		p, g.buf = p[n:], g.buf[n:]
	}
}

func (g *textGen) nextWord() []byte {
	u := g.rng.Uint64()
	// A Zipf-like choice: frequent short words, a long tail.
	idx := int(u%4096) >> (u >> 60 % 5)
	w := append(g.scratch[:0], g.words[idx]...)
	g.scratch = w
	switch u >> 56 & 31 {
	case 0:
		return append(w, ".\n"...)
	case 1, 2:
		return append(w, ", "...)
	}
	return append(w, ' ')
}

func diskUsage(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				return human(kb << 10)
			}
		}
	}
	return "unknown"
}

// loadAverage is the 1-minute load average, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func dur(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05")+" "+format+"\n", args...)
}

func markdown(o *options, rows []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Artifact transfer, %s, three local nodes\n\n", human(o.size))
	fmt.Fprintf(&b, "Command: `go run ./bench/artifacts %s`  \n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(&b, "Machine: %d CPUs, %s/%s, %s; %s; load average before the run %s; seed %d, %d uploads in flight.\n\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), time.Now().UTC().Format("2006-01-02"), o.loadBefore, o.seed, o.parallel)
	b.WriteString("| measure | result | notes |\n|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.what, r.value, r.note)
	}
	return b.String()
}
