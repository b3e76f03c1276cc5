package main

import (
	"context"
	"fmt"
	"github.com/spf13/pflag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/baton-dev/baton/client"
)

func artifactCommand() *command {
	return &command{
		name:    "artifact",
		summary: "Upload, download, inspect, list and delete artifacts",
		subs: []*command{artifactPutCommand(), artifactGetCommand(), artifactVersionsCommand(), artifactShowCommand(),
			artifactListCommand(), artifactDeleteCommand(), artifactPolicyCommand()},
		examples: `  baton artifact put report.md --tenant acme --name report-42-draft
  baton artifact get report-42-draft --tenant acme --file report.md
  baton artifact versions report-42-draft --tenant acme`,
	}
}

// transferNote explains how --timeout applies to put and get.
const transferNote = `The global --timeout bounds each request (and its retries), not the whole
transfer, which runs until it is done or interrupted. On a terminal, a
progress bar with the throughput is drawn on stderr; an upload's also
shows how many bytes were sent and how many skipped because the cluster
held their chunks already.`

// repeated is a flag that may be given several times; values are kept
// whole (URLs may hold commas).
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, " ") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }
func (r *repeated) Type() string       { return "string" }

// putResult is what artifact put prints: the manifest and the upload's
// figures.
type putResult struct {
	*client.Manifest
	Upload uploadFigures `json:"upload"`
}

type uploadFigures struct {
	Chunks         int   `json:"chunks"`
	ChunksUploaded int   `json:"chunks_uploaded"`
	BytesSent      int64 `json:"bytes_sent"`
	ElapsedMS      int64 `json:"elapsed_ms"`
}

func artifactPutCommand() *command {
	var tenant, name, mediaType, taskID string
	var sources repeated
	var metadata jsonFlag
	var fence fenceFlags
	var parallel int
	return &command{
		name:    "put",
		summary: "Upload a file as a new version of an artifact",
		args:    "FILE",
		long: `Only the chunks the cluster lacks are sent: uploading a file again sends
nothing, and when content and fields equal the latest version's, that
version is returned instead of a new one. FILE "-" reads stdin.

` + transferNote,
		examples: `  baton artifact put report.md --tenant acme --name report-42-draft --media-type text/markdown \
      --source https://example.com/paper --task-id report-42 --fence-task report-42 --fence-token 589825
  baton artifact put - --tenant acme --name logs < build.log`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&name, "name", "", "artifact name (required)")
			fs.StringVar(&mediaType, "media-type", "", "media type, e.g. text/markdown")
			fs.Var(&sources, "source", "source URL (repeatable)")
			fs.Var(&metadata, "metadata", "metadata as a JSON object")
			fs.StringVar(&taskID, "task-id", "", "the task that produced the artifact")
			fence.declare(fs)
			fs.IntVar(&parallel, "parallel", client.DefaultUploadParallel, "chunk uploads in flight")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var file string
			if err := inv.check([]arg{{"FILE", &file}}, "tenant", "name"); err != nil {
				return err
			}
			if err := checkArtifactName(inv, "--name", name); err != nil {
				return err
			}
			if parallel < 1 {
				return inv.usagef("--parallel must be at least 1, got %d", parallel)
			}
			f, err := fence.fence(inv)
			if err != nil {
				return err
			}
			opts := client.UploadOptions{MediaType: mediaType, Sources: sources, Metadata: metadata.raw,
				TaskID: taskID, Fence: f, Parallel: parallel}
			return a.artifactPut(ctx, tenant, name, file, opts)
		},
	}
}

// checkArtifactName refuses, as a usage error, an artifact name outside
// the grammar of docs/api.md, before anything is sent ("" passes: check
// and require deal with a missing one).
func checkArtifactName(inv *invocation, label, name string) error {
	if name != "" && !client.ValidName(name) {
		return inv.usagef(`%s %q: artifact names match [A-Za-z0-9][A-Za-z0-9._:-]{0,127} (no "/"; a ref's name may hold "/")`, label, name)
	}
	return nil
}

func (a *app) artifactPut(ctx context.Context, tenant, name, file string, opts client.UploadOptions) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	var in io.Reader = os.Stdin
	label := "stdin"
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		in, label = f, filepath.Base(file)
	}
	var stats client.UploadStats
	opts.Stats = &stats
	bar := a.newProgress("upload "+label, -1)
	if bar != nil {
		opts.OnProgress = bar.updateUpload
	}
	m, err := c.UploadArtifact(ctx, tenant, name, in, opts)
	bar.finish()
	if err != nil {
		return fenceRefusal(err, opts.Fence, "upload")
	}
	res := putResult{Manifest: m, Upload: uploadFigures{Chunks: stats.Chunks, ChunksUploaded: stats.ChunksUploaded,
		BytesSent: stats.BytesSent, ElapsedMS: stats.Elapsed.Milliseconds()}}
	return a.emit(res, func(w io.Writer) {
		printManifest(w, m)
		fmt.Fprintf(w, "sent:\t%s of %s (%d of %d chunks) in %s, %s\n", sizeText(stats.BytesSent), sizeText(stats.Size),
			stats.ChunksUploaded, stats.Chunks, stats.Elapsed.Round(time.Millisecond), throughput(stats.Size, stats.Elapsed))
	})
}

func artifactGetCommand() *command {
	var tenant, out string
	var version uint64
	var stale bool
	return &command{
		name:    "get",
		summary: "Download an artifact version, verified against its digest",
		args:    "NAME",
		long: `With --file FILE the content goes to a temporary file beside FILE, which
replaces FILE only once its size and digest are verified, and a summary is
printed (in the format of -o). Without --file, or with --file -, the content
streams to stdout as it arrives; a failed check then exits 1 after the
bytes were written. (Before -o chose the output format, "-o FILE" named
the file; it still does, with a warning, when FILE is not a format.)

` + transferNote,
		examples: `  baton artifact get report-42-draft --tenant acme --file report.md
  baton artifact get report-42-draft --tenant acme --version 3 | less
  baton artifact get report-42-draft --tenant acme -f report.md -o json`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVarP(&out, "file", "f", "-", "file to write, - for stdout")
			fs.Uint64Var(&version, "version", 0, "version (default: the latest)")
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var name string
			if err := inv.check([]arg{{"NAME", &name}}, "tenant", "file"); err != nil {
				return err
			}
			if err := checkArtifactName(inv, "NAME", name); err != nil {
				return err
			}
			return a.artifactGet(ctx, tenant, name, version, out, readOpts(stale))
		},
	}
}

func (a *app) artifactGet(ctx context.Context, tenant, name string, version uint64, out string, opts []client.RequestOption) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	m, err := c.GetManifest(ctx, tenant, name, version, opts...)
	if err != nil {
		return err
	}
	start := time.Now()
	bar := a.newProgress(fmt.Sprintf("download %s v%d", name, m.Version), m.Size)
	if out == "-" {
		pw := &progressWriter{w: a.stdout, p: bar, total: m.Size}
		_, err := c.DownloadArtifact(ctx, tenant, name, m.Version, pw, opts...)
		bar.finish()
		return err
	}
	if err := downloadFile(ctx, c, tenant, m, out, bar, opts); err != nil {
		return err
	}
	bar.finish()
	elapsed := time.Since(start)
	return a.emit(map[string]any{"file": out, "artifact_id": m.ArtifactID, "name": m.Name, "version": m.Version,
		"size": m.Size, "digest": m.Digest, "elapsed_ms": elapsed.Milliseconds()}, func(w io.Writer) {
		fmt.Fprintf(w, "wrote %s: %s, %s v%d, digest %s verified, in %s, %s\n", out, sizeText(m.Size), m.Name, m.Version,
			m.Digest, elapsed.Round(time.Millisecond), throughput(m.Size, elapsed))
	})
}

// downloadFile writes m's content to a temporary file beside path and
// renames it over path once verified (as client.DownloadArtifactTo, with a
// progress bar).
func downloadFile(ctx context.Context, c *client.Client, tenant string, m *client.Manifest, path string, bar *progress, opts []client.RequestOption) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	pw := &progressWriter{w: tmp, p: bar, total: m.Size}
	if _, err := c.DownloadArtifact(ctx, tenant, m.Name, m.Version, pw, opts...); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	done = true
	return nil
}

func artifactVersionsCommand() *command {
	var tenant string
	var stale bool
	return &command{
		name:     "versions",
		aliases:  []string{"list-versions"},
		summary:  "List the versions of an artifact, oldest first",
		args:     "NAME",
		examples: "  baton artifact versions report-42-draft --tenant acme\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var name string
			if err := inv.check([]arg{{"NAME", &name}}, "tenant"); err != nil {
				return err
			}
			if err := checkArtifactName(inv, "NAME", name); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				list, err := c.ListVersions(ctx, tenant, name, readOpts(stale)...)
				if err != nil {
					return err
				}
				return a.emit(map[string]any{"versions": list}, func(w io.Writer) { printVersions(w, list) })
			})
		},
	}
}

func artifactShowCommand() *command {
	var tenant, id string
	var version uint64
	var stale bool
	return &command{
		name:    "show",
		summary: "Show an artifact version's manifest, by name or by artifact id",
		args:    "[NAME]",
		long:    "Give NAME (with --version, default the latest) or --id ARTIFACT_ID.",
		examples: `  baton artifact show report-42-draft --tenant acme --version 2
  baton artifact show --tenant acme --id sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&id, "id", "", "artifact id (instead of NAME)")
			fs.Uint64Var(&version, "version", 0, "version (default: the latest)")
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var name string
			var args []arg
			if id == "" {
				args = []arg{{"NAME", &name}}
			} else if inv.isSet("version") {
				return inv.usagef("--version does not go with --id")
			}
			if err := inv.check(args, "tenant"); err != nil {
				return err
			}
			if err := checkArtifactName(inv, "NAME", name); err != nil {
				return err
			}
			c, ctx, cancel, err := a.connect(ctx, 0)
			if err != nil {
				return err
			}
			defer cancel()
			var m *client.Manifest
			if id != "" {
				m, err = c.GetArtifactByID(ctx, tenant, id, readOpts(stale)...)
			} else {
				m, err = c.GetManifest(ctx, tenant, name, version, readOpts(stale)...)
			}
			if err != nil {
				return err
			}
			return a.emit(m, func(w io.Writer) {
				printManifest(w, m)
				printChunks(w, m.Chunks)
			})
		},
	}
}

func printManifest(w io.Writer, m *client.Manifest) {
	rows := [][2]string{
		{"artifact id", m.ArtifactID}, {"name", m.Name}, {"version", fmt.Sprint(m.Version)},
		{"size", sizeText(m.Size)}, {"digest", m.Digest}, {"chunks", fmt.Sprint(len(m.Chunks))},
		{"media type", dash(m.MediaType)}, {"sources", dash(strings.Join(m.Sources, " "))},
		{"metadata", rawText(m.Metadata)}, {"task", dash(m.TaskID)}, {"fencing token", fmt.Sprint(m.FencingToken)},
		{"created by", dash(m.CreatedBy)}, {"created", timeText(m.CreatedAt)},
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s:\t%s\n", r[0], r[1])
	}
}

func printChunks(w io.Writer, chunks []client.ChunkRef) {
	if len(chunks) == 0 {
		return
	}
	fmt.Fprintln(w, "\nCHUNK\tDIGEST\tSIZE")
	for i, c := range chunks {
		fmt.Fprintf(w, "%d\t%s\t%d\n", i, c.Digest, c.Size)
	}
}

func printVersions(w io.Writer, list []client.Manifest) {
	fmt.Fprintln(w, "VERSION\tARTIFACT ID\tSIZE\tCHUNKS\tTASK\tCREATED BY\tCREATED")
	for _, m := range list {
		fmt.Fprintf(w, "%d\t%s\t%d\t%d\t%s\t%s\t%s\n", m.Version, m.ArtifactID, m.Size, len(m.Chunks),
			dash(m.TaskID), dash(m.CreatedBy), timeText(m.CreatedAt))
	}
}
