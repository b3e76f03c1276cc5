package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/chaos/artifactfake"
	"github.com/baton-dev/baton/client"
)

// artifactCLI runs baton against node.
func artifactCLI(t *testing.T, node http.Handler, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	srv := httptest.NewServer(node)
	t.Cleanup(srv.Close)
	var out, errOut bytes.Buffer
	full := append([]string{"--endpoints", srv.URL, "--timeout", "5s", "--token", "tok"}, args...)
	code = run(context.Background(), full, &out, &errOut)
	return code, out.String(), errOut.String()
}

// writeContent writes n pseudo-random bytes to a file and returns its path.
func writeContent(t *testing.T, seed uint64, n int) (string, []byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	data := make([]byte, n)
	for i := range data {
		data[i] = 'a' + byte(rng.IntN(26))
	}
	path := filepath.Join(t.TempDir(), "report.txt")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, data
}

func TestArtifactPutGet(t *testing.T) {
	node := artifactfake.New()
	file, data := writeContent(t, 1, 5<<20)
	code, stdout, stderr := artifactCLI(t, node, "artifact", "put", file, "--tenant", "acme", "--name", "report",
		"--media-type", "text/plain", "--source", "https://example.com/a,b", "--source", "https://example.com/c",
		"--task-id", "t1", "--fence-task", "t1", "--fence-token", "589825")
	if code != 0 {
		t.Fatalf("put: exit %d: %s", code, stderr)
	}
	if stderr != "" {
		t.Errorf("put wrote %q to stderr, want nothing (not a terminal)", stderr)
	}
	for _, want := range []string{"artifact id:", "version:", "5242880 bytes (5.0 MiB)", "fencing token:  589825",
		"sent:", "5242880 bytes (5.0 MiB) of 5242880 bytes (5.0 MiB)", "MB/s"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("put output lacks %q:\n%s", want, stdout)
		}
	}
	reqs := node.Requests()
	publish := reqs[len(reqs)-1]
	for _, want := range []string{`"sources":["https://example.com/a,b","https://example.com/c"]`,
		`"fence":{"task_id":"t1","token":589825}`, `"task_id":"t1"`, `"media_type":"text/plain"`} {
		if publish.Route != "POST /v1/tenants/acme/artifacts/report/versions" || !strings.Contains(publish.Body, want) {
			t.Errorf("publish %s %s lacks %s", publish.Route, publish.Body, want)
		}
	}

	// Again, as JSON: nothing is sent, the same version comes back.
	code, stdout, stderr = artifactCLI(t, node, "--output", "json", "artifact", "put", file, "--tenant", "acme", "--name", "report",
		"--media-type", "text/plain", "--source", "https://example.com/a,b", "--source", "https://example.com/c",
		"--task-id", "t1", "--fence-task", "t1", "--fence-token", "589825")
	if code != 0 {
		t.Fatalf("second put: exit %d: %s", code, stderr)
	}
	var res struct {
		client.Manifest
		Upload struct {
			Chunks         int   `json:"chunks"`
			ChunksUploaded int   `json:"chunks_uploaded"`
			BytesSent      int64 `json:"bytes_sent"`
		} `json:"upload"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("put --output json: %v\n%s", err, stdout)
	}
	if res.Version != 1 || res.Upload.BytesSent != 0 || res.Upload.ChunksUploaded != 0 || res.Upload.Chunks < 2 {
		t.Errorf("second put: got version %d upload %+v, want version 1 with nothing sent", res.Version, res.Upload)
	}

	// Download to a file, and to stdout.
	out := filepath.Join(t.TempDir(), "out.txt")
	code, stdout, stderr = artifactCLI(t, node, "artifact", "get", "report", "--tenant", "acme", "-o", out)
	if code != 0 {
		t.Fatalf("get: exit %d: %s", code, stderr)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
		t.Errorf("get wrote %d bytes, not the uploaded content", len(got))
	}
	if !strings.Contains(stdout, "wrote "+out) || !strings.Contains(stdout, "verified") || !strings.Contains(stdout, "report v1") {
		t.Errorf("get output: %s", stdout)
	}
	code, stdout, stderr = artifactCLI(t, node, "artifact", "get", "report", "--tenant", "acme", "--version", "1", "-o", "-")
	if code != 0 || stdout != string(data) {
		t.Errorf("get -o -: exit %d, %d bytes on stdout, stderr %q", code, len(stdout), stderr)
	}

	// A corrupt download fails and leaves nothing behind.
	node.SetFaults(true, false)
	bad := filepath.Join(t.TempDir(), "bad.txt")
	code, _, stderr = artifactCLI(t, node, "artifact", "get", "report", "--tenant", "acme", "-o", bad)
	if code != 1 || !strings.Contains(stderr, "digest_mismatch") {
		t.Errorf("corrupt get: exit %d stderr %q, want 1 and digest_mismatch", code, stderr)
	}
	if entries, _ := os.ReadDir(filepath.Dir(bad)); len(entries) != 0 {
		t.Errorf("corrupt get left %d files behind", len(entries))
	}
}

func TestArtifactInspect(t *testing.T) {
	node := artifactfake.New()
	file, _ := writeContent(t, 2, 100_000)
	if code, _, stderr := artifactCLI(t, node, "artifact", "put", file, "--tenant", "acme", "--name", "report"); code != 0 {
		t.Fatalf("put: exit %d: %s", code, stderr)
	}
	id := node.Versions("report")[0].ArtifactID
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"artifact", "versions", "report"}, []string{"VERSION", "ARTIFACT ID", id, "100000"}},
		{[]string{"artifact", "show", "report"}, []string{"artifact id:", id, "CHUNK", "DIGEST"}},
		{[]string{"artifact", "show", "--id", id}, []string{"name:", "report"}},
		{[]string{"ref", "set", "report/approved", id, "--expect-absent"}, []string{"ref:", "report/approved", "revision:", "1"}},
		{[]string{"ref", "set", "report/approved", id, "--expect", id}, []string{"revision:", "1"}},
		{[]string{"ref", "get", "report/approved"}, []string{"artifact id:", id}},
		{[]string{"ref", "ls", "--prefix", "report/"}, []string{"REF", "report/approved", id}},
		{[]string{"ref", "delete", "report/approved", "--expect", id}, []string{"deleted ref report/approved"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			code, stdout, stderr := artifactCLI(t, node, append(tc.args, "--tenant", "acme")...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
	code, _, stderr := artifactCLI(t, node, "ref", "set", "report/approved", id, "--expect", strings.Repeat("0", 10), "--tenant", "acme")
	want := `baton: version_mismatch: ref "report/approved" does not exist (expected it to point to 0000000000); --expect refused the move` + "\n"
	if code != 3 || stderr != want {
		t.Errorf("ref set with a wrong expectation: exit %d stderr %q, want 3 and %q", code, stderr, want)
	}
	if code, _, stderr := artifactCLI(t, node, "ref", "put", "report/approved", id, "--tenant", "acme"); code != 0 {
		t.Fatalf("ref put: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := artifactCLI(t, node, "ref", "set", "report/approved", "sha256:new", "--expect-absent", "--tenant", "acme")
	want = `baton: version_mismatch: ref "report/approved" exists (points to ` + id + `); --expect-absent refused the move` + "\n"
	if code != 3 || stderr != want || stdout != "" {
		t.Errorf("ref set --expect-absent on an existing ref: exit %d stdout %q stderr %q, want 3 and %q", code, stdout, stderr, want)
	}
	code, _, stderr = artifactCLI(t, node, "ref", "rm", "report/approved", "--expect", "sha256:old", "--tenant", "acme")
	want = `baton: version_mismatch: ref "report/approved" points to ` + id + `, not the expected sha256:old; --expect refused the delete` + "\n"
	if code != 3 || stderr != want {
		t.Errorf("ref rm --expect with another id: exit %d stderr %q, want 3 and %q", code, stderr, want)
	}
}

func TestArtifactRequestsSent(t *testing.T) {
	id := client.Digest([]byte("x"))
	cases := []struct {
		args         []string
		route, query string
		body         string
	}{
		{[]string{"ref", "set", "a/b", id, "--expect-absent"}, "PUT /v1/tenants/acme/refs/a/b", "",
			`{"artifact_id":"` + id + `","expect_artifact_id":""}`},
		{[]string{"ref", "set", "a", id, "--fence-task", "t1", "--fence-token", "7"}, "PUT /v1/tenants/acme/refs/a", "",
			`{"artifact_id":"` + id + `","fence":{"task_id":"t1","token":7}}`},
		{[]string{"ref", "ls"}, "GET /v1/tenants/acme/refs", "", ""},
		{[]string{"ref", "get", "a", "--stale"}, "GET /v1/tenants/acme/refs/a", "consistency=stale", ""},
		{[]string{"ref", "delete", "a"}, "DELETE /v1/tenants/acme/refs/a", "", ""},
		{[]string{"artifact", "versions", "rep", "--stale"}, "GET /v1/tenants/acme/artifacts/rep/versions", "consistency=stale", ""},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			node := artifactfake.New()
			node.PutRef(client.Ref{Ref: "a", ArtifactID: id})
			code, _, stderr := artifactCLI(t, node, append(tc.args, "--tenant", "acme")...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			r := node.Requests()[0]
			if r.Route != tc.route || r.Query != tc.query || strings.TrimSpace(r.Body) != tc.body || r.Auth != "Bearer tok" {
				t.Errorf("got %s?%s %s, want %s?%s %s", r.Route, r.Query, r.Body, tc.route, tc.query, tc.body)
			}
		})
	}
}

func TestArtifactUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"artifact", "put", "f", "--tenant", "acme"}, "--name is required"},
		{[]string{"artifact", "put", "--tenant", "acme", "--name", "n"}, "missing FILE"},
		{[]string{"artifact", "put", "f", "--tenant", "acme", "--name", "n", "--fence-task", "t1"}, "--fence-task and --fence-token go together"},
		{[]string{"artifact", "put", "f", "--tenant", "acme", "--name", "n", "--parallel", "0"}, "--parallel must be at least 1"},
		{[]string{"artifact", "put", "f", "--tenant", "acme", "--name", "n", "--metadata", "{"}, "not valid JSON"},
		{[]string{"artifact", "get", "n", "--tenant", "acme", "--file", ""}, "--file is required"},
		{[]string{"artifact", "show", "--id", "x", "--version", "2", "--tenant", "acme"}, "--version does not go with --id"},
		{[]string{"artifact", "frob"}, `unknown command "frob" for "baton artifact"`},
		{[]string{"ref", "set", "r", "--tenant", "acme"}, "missing ARTIFACT_ID"},
		{[]string{"ref", "set", "r", "id", "--tenant", "acme", "--expect", "a", "--expect-absent"}, "exclude each other"},
		{[]string{"ref", "set", "r", "id", "--tenant", "acme", "--expect", ""}, "use --expect-absent"},
		{[]string{"ref", "delete", "--tenant", "acme"}, "missing REF"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			node := artifactfake.New()
			code, _, stderr := artifactCLI(t, node, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("got exit %d stderr %q, want 2 and %q", code, stderr, tc.want)
			}
			if n := len(node.Requests()); n != 0 {
				t.Errorf("usage error sent %d requests", n)
			}
		})
	}
}

func TestArtifactHelp(t *testing.T) {
	for _, args := range [][]string{{"artifact", "put", "--help"}, {"artifact", "get", "--help"}, {"ref", "put", "--help"}} {
		code, stdout, _ := artifactCLI(t, artifactfake.New(), args...)
		if code != 0 || !strings.Contains(stdout, "Examples:") || !strings.Contains(stdout, "baton "+args[0]+" "+args[1]) {
			t.Errorf("%v: exit %d, output:\n%s", args, code, stdout)
		}
	}
}

// TestProgressBar: on a terminal, put and get draw a bar with the
// throughput on stderr; the final line ends at 100%.
func TestProgressBar(t *testing.T) {
	old := isTerminal
	isTerminal = func(io.Writer) bool { return true }
	t.Cleanup(func() { isTerminal = old })
	node := artifactfake.New()
	file, _ := writeContent(t, 3, 3<<20)
	code, _, stderr := artifactCLI(t, node, "artifact", "put", file, "--tenant", "acme", "--name", "report")
	if code != 0 {
		t.Fatalf("put: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"\rupload report.txt [", "100%", "3.0/3.0 MiB", "sent 3.0 MiB, skipped 0.0 MiB (held)", "MB/s", "\n"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("put progress lacks %q: %q", want, stderr)
		}
	}
	// The same file again: every byte is done, none sent.
	code, _, stderr = artifactCLI(t, node, "artifact", "put", file, "--tenant", "acme", "--name", "report")
	if code != 0 || !strings.Contains(stderr, "100%  3.0/3.0 MiB  sent 0.0 MiB, skipped 3.0 MiB (held)") {
		t.Errorf("put again: exit %d, progress %q; want every byte skipped", code, stderr)
	}
	code, _, stderr = artifactCLI(t, node, "artifact", "get", "report", "--tenant", "acme", "-o", filepath.Join(t.TempDir(), "o"))
	if code != 0 || !strings.Contains(stderr, "download report v1 [") || !strings.Contains(stderr, "100%") {
		t.Errorf("get progress: exit %d stderr %q", code, stderr)
	}
}

func TestProgressLine(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		done, total int64
		elapsed     time.Duration
		want        string
	}{
		{0, 100 << 20, 0, "x [>                             ]   0%  0.0/100.0 MiB  - MB/s"},
		{50 << 20, 100 << 20, time.Second, "x [===============>              ]  50%  50.0/100.0 MiB  52.4 MB/s"},
		{100 << 20, 100 << 20, 2 * time.Second, "x [==============================] 100%  100.0/100.0 MiB  52.4 MB/s"},
		{3 << 20, -1, time.Second, "x  3.0 MiB  3.1 MB/s"},
	}
	for _, tc := range cases {
		p := &progress{label: "x", total: tc.total, start: start, done: tc.done}
		if got := p.line(start.Add(tc.elapsed)); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
	if got := sizeText(1 << 30); got != "1073741824 bytes (1.0 GiB)" {
		t.Errorf("sizeText: got %q", got)
	}
}
