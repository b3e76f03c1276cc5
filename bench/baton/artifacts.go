package baton

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/bench/machine"
	"github.com/baton-dev/baton/bench/result"
	"github.com/baton-dev/baton/client"
)

// ArtifactParams size the artifacts workload.
type ArtifactParams struct {
	Size     int64  // bytes of the artifact
	Seed     uint64 // of the generated content (NewText)
	Parallel int    // chunk uploads in flight; 0: the SDK's default
	// Dir holds the content files (written before the timings).
	Dir string
	// ProfileUpload, when set, runs around the first upload: it starts
	// whatever profiles the caller takes and returns the function that
	// stops them.
	ProfileUpload func(ctx context.Context) (stop func(), err error)
	// Logf receives progress lines; nil: none.
	Logf func(format string, args ...any)
}

// Artifacts is the artifacts workload (issue 34): one SDK process uploads
// a Size artifact from a file, as `baton artifact put` does (the content is
// streamed, never held in memory), downloads it with the size and SHA-256
// verified, uploads the same file again (which sends no chunk the cluster
// holds), and uploads it with 1 MiB changed in the middle. Figures are
// metrics of the run: MB/s are 10^6 bytes per second of the artifact's size.
func Artifacts(ctx context.Context, env *Env, p ArtifactParams) (*result.Run, error) {
	logf := p.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	r := &result.Run{System: result.SystemBaton, Workload: result.WorkloadArtifacts, Variant: "size=" + HumanBytes(p.Size), Workers: 1}
	c := env.Cluster
	if err := waitAddresses(ctx, env); err != nil {
		return nil, err
	}
	cl, err := client.New(client.Config{Endpoints: c.Endpoints(), Token: env.Token, Timeout: 30 * time.Second, MaxRetry: time.Minute})
	if err != nil {
		return nil, err
	}
	// The content goes to files first, outside the timings: the generator's
	// own CPU (as much as the upload's hashing) stays out of the figures.
	logf("writing the content files (%s)", HumanBytes(p.Size))
	base, err := writeContent(p, "content", -1)
	if err != nil {
		return nil, err
	}
	changed, err := writeContent(p, "content-changed", p.Size/2)
	if err != nil {
		return nil, err
	}
	const name = "corpus"
	mbps := func(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

	logf("uploading %s", HumanBytes(p.Size))
	stop := func() {}
	if p.ProfileUpload != nil {
		if stop, err = p.ProfileUpload(ctx); err != nil {
			return nil, err
		}
	}
	up, err := uploadFile(ctx, cl, name, base, p, logf)
	stop()
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	r.SetMetric("upload_mb_per_s", mbps(p.Size, up.stats.Elapsed))
	r.SetMetric("upload_s", up.stats.Elapsed.Seconds())
	r.SetMetric("upload_chunks", float64(up.stats.Chunks))
	r.SetMetric("upload_publish_s", (up.stats.Elapsed - up.settled).Seconds())

	logf("downloading")
	start := time.Now()
	n, err := cl.DownloadArtifact(ctx, Tenant, name, up.m.Version, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	if n != p.Size {
		return nil, fmt.Errorf("download: %d bytes, want %d", n, p.Size)
	}
	r.SetMetric("download_mb_per_s", mbps(n, time.Since(start)))

	logf("re-uploading unchanged")
	again, err := uploadFile(ctx, cl, name, base, p, logf)
	if err != nil {
		return nil, fmt.Errorf("re-upload: %w", err)
	}
	if again.m.ArtifactID != up.m.ArtifactID {
		return nil, fmt.Errorf("re-upload: artifact %s, want the first upload's %s", again.m.ArtifactID, up.m.ArtifactID)
	}
	r.SetMetric("reupload_mb_per_s", mbps(p.Size, again.stats.Elapsed))
	r.SetMetric("reupload_bytes_sent", float64(again.stats.BytesSent))
	r.SetMetric("reupload_chunks_sent", float64(again.stats.ChunksUploaded))

	logf("uploading with 1 MiB changed in the middle")
	patched, err := uploadFile(ctx, cl, name, changed, p, logf)
	if err != nil {
		return nil, fmt.Errorf("patched upload: %w", err)
	}
	r.SetMetric("patched_chunks_sent", float64(patched.stats.ChunksUploaded))
	r.SetMetric("patched_bytes_sent", float64(patched.stats.BytesSent))

	for i := range c.Size() {
		r.SetMetric("chunk_store_bytes_"+c.ID(i), float64(machine.DirSize(filepath.Join(c.DataDir(i), "chunks"))))
	}
	parallel := p.Parallel
	if parallel == 0 {
		parallel = client.DefaultUploadParallel
	}
	r.Notef("one Go SDK process, %d chunk uploads in flight; text-like content of seed %d written to a file first and uploaded from it (untimed); "+
		"upload = to the publish's answer (the server re-reads and verifies the content); download = size and SHA-256 verified by the SDK; "+
		"re-upload = the same file again (the same artifact id); MB = 10^6 bytes", parallel, p.Seed)
	return r, nil
}

type uploaded struct {
	m       *client.Manifest
	stats   client.UploadStats
	settled time.Duration // until every chunk was held by the cluster
}

func uploadFile(ctx context.Context, cl *client.Client, name, path string, p ArtifactParams, logf func(string, ...any)) (*uploaded, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	u := &uploaded{}
	start := time.Now()
	next := int64(0)
	m, err := cl.UploadArtifact(ctx, Tenant, name, f, client.UploadOptions{MediaType: "text/plain", Parallel: p.Parallel,
		Size: p.Size, Stats: &u.stats, Progress: func(done, total int64) {
			if done >= next {
				logf("  %5.1f%%  %s", 100*float64(done)/float64(total), HumanBytes(done))
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

// writeContent writes NewText's content to a file of p.Dir.
func writeContent(p ArtifactParams, name string, patchAt int64) (string, error) {
	path := filepath.Join(p.Dir, name)
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if _, err := io.CopyBuffer(f, NewText(p.Seed, p.Size, patchAt), make([]byte, 1<<20)); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

// waitAddresses waits until every node knows every member's HTTP address:
// chunk copies go to peers by that address.
func waitAddresses(ctx context.Context, env *Env) error {
	c := env.Cluster
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

// ParseSize reads "1GiB", "512MiB", "64KiB", "1GB", "10MB" or plain bytes.
func ParseSize(s string) (int64, error) {
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

// HumanBytes writes n bytes in GiB, MiB, KiB or B.
func HumanBytes(n int64) string {
	for _, u := range []struct {
		unit string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size {
			return strconv.FormatFloat(math.Round(float64(n)/float64(u.size)*100)/100, 'f', -1, 64) + u.unit
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
