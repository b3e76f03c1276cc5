package report

import (
	"fmt"

	"github.com/baton-dev/baton/bench/result"
)

// The artifacts goals (issue 34), in MB/s (10^6 bytes per second).
const (
	ArtifactUploadGoal   = 150.0
	ArtifactDownloadGoal = 500.0
	ArtifactReuploadGoal = 400.0
)

func (w *writer) artifactsRun() *result.Run {
	for _, r := range w.s.Runs {
		if r.Workload == result.WorkloadArtifacts && r.System == result.SystemBaton {
			return r
		}
	}
	return nil
}

// artifactGoals are the three throughput goals of one large artifact.
func (w *writer) artifactGoals() []goal {
	r := w.artifactsRun()
	size := "1GiB"
	if r != nil {
		size = r.Variant[len("size="):]
	}
	rows := []struct {
		metric, text string
		goal         float64
	}{
		{"upload_mb_per_s", "artifacts: upload of %s ≥ %.0f MB/s", ArtifactUploadGoal},
		{"download_mb_per_s", "artifacts: download of %s (verified) ≥ %.0f MB/s", ArtifactDownloadGoal},
		{"reupload_mb_per_s", "artifacts: re-upload of the same %s ≥ %.0f MB/s", ArtifactReuploadGoal},
	}
	var gs []goal
	for _, row := range rows {
		text := fmt.Sprintf(row.text, "1 GiB", row.goal)
		v, ok := r.Metric(row.metric)
		switch {
		case !ok:
			gs = append(gs, goal{text, "—", "not measured"})
		case size != "1GiB":
			gs = append(gs, goal{text, fmt.Sprintf("%.0f MB/s with only %s", v, size), "not measured"})
		default:
			gs = append(gs, goal{text, fmt.Sprintf("%.0f MB/s", v), metIf(v >= row.goal)})
		}
	}
	return gs
}

func (w *writer) artifacts() {
	r := w.artifactsRun()
	if r == nil {
		return
	}
	w.p("## artifacts: %s\n", r.Variant)
	w.p("Baton only: one artifact through one Go SDK process (`UploadArtifact` from a file, `DownloadArtifact`), on a fresh cluster. Goals (issue 34): upload ≥ %.0f MB/s, download ≥ %.0f MB/s, re-upload of content the cluster holds ≥ %.0f MB/s, at 1 GiB.\n",
		ArtifactUploadGoal, ArtifactDownloadGoal, ArtifactReuploadGoal)
	if r.Failed != "" {
		w.p("The artifacts run failed: %s\n", oneLine(r.Failed))
	}
	w.p("| figure | value |\n|---|---|")
	for _, f := range []struct {
		key, name string
		f         func(float64) string
	}{
		{"upload_mb_per_s", "upload, MB/s (to the publish's answer)", secs},
		{"upload_s", "  upload time, s", secs},
		{"upload_publish_s", "  of which the publish (the server re-reads and verifies), s", secs},
		{"upload_chunks", "  chunks", rate},
		{"download_mb_per_s", "download, MB/s (size and SHA-256 verified by the SDK)", secs},
		{"reupload_mb_per_s", "re-upload of the same file, MB/s", secs},
		{"reupload_bytes_sent", "  bytes sent by it", rate},
		{"patched_chunks_sent", "upload with 1 MiB changed in the middle: chunks sent", rate},
		{"patched_bytes_sent", "  bytes sent", rate},
		{"chunk_store_bytes_n1", "chunk store on n1 (both versions, zstd where smaller)", mib},
		{"raft_elections", "Raft elections during the run", rate},
	} {
		if v, ok := r.Metric(f.key); ok {
			w.p("| %s | %s |", f.name, f.f(v))
		}
	}
	w.p("")
}
