package client_test

import (
	"bytes"
	"sync"
	"testing"

	"github.com/baton-dev/baton/client"
)

// TestUploadProgressSentAndSkipped, against the real batond of TestMain:
// OnProgress splits the settled bytes into those sent and those skipped
// because the cluster held their chunks. A first upload sends everything;
// the same content again skips everything; content of which half is new
// sends about that half. Each series ends at the content's length and never
// goes back.
func TestUploadProgressSentAndSkipped(t *testing.T) {
	c := nodeClient(t)
	// Content and name new on every run: -count=N shares the node, which
	// keeps the chunks of the runs before.
	name := uniqueName("progress-split")
	data := textContent(fresh(), 6<<20+777)
	edited := append(append([]byte(nil), data[:len(data)/2]...), textContent(fresh(), len(data)-len(data)/2)...)
	for _, tc := range []struct {
		name    string
		content []byte
		check   func(last client.UploadProgress, st client.UploadStats) bool
	}{
		{"first", data, func(p client.UploadProgress, st client.UploadStats) bool {
			return p.Sent == int64(len(data)) && p.Skipped == 0
		}},
		{"again", data, func(p client.UploadProgress, st client.UploadStats) bool {
			return p.Sent == 0 && p.Skipped == int64(len(data))
		}},
		{"half new", edited, func(p client.UploadProgress, st client.UploadStats) bool {
			return p.Sent == st.BytesSent && p.Sent > 0 && p.Skipped > 0
		}},
	} {
		var mu sync.Mutex
		var series []client.UploadProgress
		var st client.UploadStats
		_, err := c.UploadArtifact(bg, "acme", name, bytes.NewReader(tc.content), client.UploadOptions{Stats: &st,
			OnProgress: func(p client.UploadProgress) {
				mu.Lock()
				series = append(series, p)
				mu.Unlock()
			}})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(series) == 0 {
			t.Fatalf("%s: no progress", tc.name)
		}
		for i, p := range series {
			if p.Total != int64(len(tc.content)) || (i > 0 && (p.Sent < series[i-1].Sent || p.Skipped < series[i-1].Skipped)) {
				t.Fatalf("%s: progress %d %+v after %+v: want total %d and no step back", tc.name, i, p, series[max(i-1, 0)], len(tc.content))
			}
		}
		last := series[len(series)-1]
		if last.Settled() != int64(len(tc.content)) || !tc.check(last, st) {
			t.Errorf("%s: last progress %+v (stats %+v) for %d bytes", tc.name, last, st, len(tc.content))
		}
	}
}
