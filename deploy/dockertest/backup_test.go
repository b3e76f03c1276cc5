package dockertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

const vaultTenant = "vault"

// sample is what writeSample wrote: KV entries, tasks and one artifact of
// several chunks, with its bytes.
type sample struct {
	kv    map[string]string // key (namespace cfg) -> value
	tasks []string          // ids, queue build
	art   *client.Manifest
	body  []byte
}

// writeSample writes tasks, KV entries and an artifact into tenant vault
// through c (over 127.0.0.1).
func writeSample(t *testing.T, c *client.Client) sample {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.PutTenant(ctx, vaultTenant); err != nil {
		t.Fatal(err)
	}
	smp := sample{kv: map[string]string{}}
	for i := range 5 {
		key, val := fmt.Sprintf("k%d", i), fmt.Sprintf(`{"n":%d}`, i)
		if _, err := c.PutKV(ctx, vaultTenant, "cfg", key, client.PutKVRequest{Value: json.RawMessage(val)}); err != nil {
			t.Fatal(err)
		}
		smp.kv[key] = val
	}
	for i := range 4 {
		id := fmt.Sprintf("t%d", i)
		if _, err := c.CreateTask(ctx, vaultTenant, client.CreateTaskRequest{TaskID: id, Queue: "build",
			Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
		smp.tasks = append(smp.tasks, id)
	}
	smp.body = make([]byte, 3<<20+4321)
	rand.New(rand.NewSource(16)).Read(smp.body)
	m, err := c.UploadArtifact(ctx, vaultTenant, "model", bytes.NewReader(smp.body), client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Chunks) < 2 {
		t.Fatalf("the artifact has %d chunks; the test wants several", len(m.Chunks))
	}
	smp.art = m
	return smp
}

// taskView is what of a task must survive a backup and a recovery.
type taskView struct {
	ID, Queue, Status string
	Payload           string
}

func listTasks(t *testing.T, c *client.Client) []taskView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := c.ListTasks(ctx, vaultTenant, client.ListTasksOptions{Queue: "build"})
	if err != nil {
		t.Fatal(err)
	}
	var out []taskView
	for _, tk := range l.Tasks {
		out = append(out, taskView{tk.TaskID, tk.Queue, tk.Status, string(tk.Payload)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// checkSample checks through c that the KV entries and tasks are there,
// and downloads the artifact from each of urls (that node alone, a stale
// read) and compares its bytes.
func checkSample(t *testing.T, c *client.Client, urls []string, smp sample) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for key, val := range smp.kv {
		e, err := c.GetKV(ctx, vaultTenant, "cfg", key)
		if err != nil {
			t.Errorf("kv %s: %v", key, err)
			continue
		}
		if string(e.Value) != val {
			t.Errorf("kv %s: %s, want %s", key, e.Value, val)
		}
	}
	got := listTasks(t, c)
	if len(got) != len(smp.tasks) {
		t.Errorf("tasks: %+v, want %v", got, smp.tasks)
	}
	for i, tk := range got {
		if i < len(smp.tasks) && (tk.ID != smp.tasks[i] || tk.Payload != fmt.Sprintf(`{"i":%d}`, i)) {
			t.Errorf("task %d: %+v, want %s with payload {\"i\":%d}", i, tk, smp.tasks[i], i)
		}
	}
	for _, u := range urls {
		downloadFrom(t, c, u, smp)
	}
}

// downloadFrom downloads the sample's artifact from one node (stale read:
// that node's own state and chunk store, or what it fetches from its
// peers) until it answers, and checks every byte.
func downloadFrom(t *testing.T, c *client.Client, url string, smp sample) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		n, err := c.DownloadArtifact(ctx, vaultTenant, smp.art.Name, smp.art.Version, &got, client.At(url), client.Stale())
		cancel()
		if err == nil {
			if n != smp.art.Size || !bytes.Equal(got.Bytes(), smp.body) {
				t.Errorf("artifact from %s: %d bytes (want %d), same bytes %v", url, n, smp.art.Size, bytes.Equal(got.Bytes(), smp.body))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("artifact from %s: %v (for 30s)", url, err)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// oneShot runs batond with args in a one-shot container of node n's
// service (its volumes, none of its ports, no dependency started), with
// extra `docker-compose run` options before the service name.
func (s *stack) oneShot(n string, runOpts []string, args ...string) string {
	s.t.Helper()
	full := append([]string{"run", "--rm", "-T", "--no-deps", "--entrypoint", "/usr/local/bin/batond"}, runOpts...)
	full = append(full, n)
	full = append(full, args...)
	return s.composeRun(s.files[:1], full...)
}

const threePeers = "n1=n1:8001,n2=n2:8001,n3=n3:8001"

// TestComposeBackupRestore backs up a running compose cluster with
// `baton backup save` (the CLI in the image), restores the file into the
// three empty data volumes of a fresh compose project with `batond
// restore` in one-shot containers, starts that project and checks that
// its members agree on a state digest and serve the old cluster's tasks,
// KV entries and artifact bytes. (docs/operations.md "Backup and
// restore".)
func TestComposeBackupRestore(t *testing.T) {
	requireDocker(t)
	old := newStack(t)
	old.up(three)
	smp := writeSample(t, old.admin)
	before := old.converge(three, 60*time.Second)
	beforeView, err := old.view(context.Background(), "n1")
	if err != nil {
		t.Fatal(err)
	}

	out := old.mustCLI("n1", "backup", "save", "/tmp/cluster.backup")
	if !strings.Contains(out, "verified") {
		t.Fatalf("baton backup save: %s", out)
	}
	// The file on this host, in a directory the containers' user can read
	// through a bind mount.
	dir := filepath.Join(t.TempDir(), "backup")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "cluster.backup")
	old.docker("cp", old.id("n1")+":/tmp/cluster.backup", file)
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := client.VerifyBackup(f)
	f.Close()
	if err != nil {
		t.Fatalf("the backup copied out of n1 does not verify: %v", err)
	}
	if sum.Header.Chunks < int64(len(smp.art.Chunks)) {
		t.Errorf("the backup holds %d chunks, the artifact names %d", sum.Header.Chunks, len(smp.art.Chunks))
	}
	// Nothing was written since the convergence: the backup is that state.
	if after := old.converge(three, 30*time.Second); after == before && sum.Header.AppliedIndex == beforeView.AppliedIndex &&
		sum.Header.StateDigest != before {
		t.Errorf("backup of %s at %d; the cluster had %s there", sum.Header.StateDigest, sum.Header.AppliedIndex, before)
	}
	t.Logf("backup: state %.19s at index %d, %d chunks, %d bytes", sum.Header.StateDigest, sum.Header.AppliedIndex,
		sum.Header.Chunks, sum.Bytes)

	// A fresh project: empty volumes, its own certificates, token and ports.
	fresh := newStack(t)
	restored := regexp.MustCompile(`state (sha256:[0-9a-f]{64}) at index (\d+) \(verified\)`)
	for _, n := range three {
		out := fresh.oneShot(n, []string{"-v", dir + ":/backup:ro"},
			"restore", "--from", "/backup/cluster.backup", "--data-dir", "/data", "--id", n, "--peers", threePeers)
		m := restored.FindStringSubmatch(out)
		if m == nil || m[1] != sum.Header.StateDigest || m[2] != fmt.Sprint(sum.Header.AppliedIndex) {
			t.Fatalf("batond restore %s said %q; want state %s at index %d", n, out, sum.Header.StateDigest, sum.Header.AppliedIndex)
		}
	}
	fresh.up(three)
	for _, n := range three {
		st, err := fresh.view(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		if st.RestoredSnapshotIndex != sum.Header.AppliedIndex {
			t.Errorf("%s restored index %d, want the backup's %d", n, st.RestoredSnapshotIndex, sum.Header.AppliedIndex)
		}
	}
	digest := fresh.converge(three, 60*time.Second)
	t.Logf("restored project %s: members agree on %.19s", fresh.project, digest)

	var urls []string
	for _, n := range three {
		urls = append(urls, fresh.url(n))
	}
	checkSample(t, fresh.admin, urls, smp)
	// The same tasks as the old cluster, field for field.
	if o, n := listTasks(t, old.admin), listTasks(t, fresh.admin); fmt.Sprint(o) != fmt.Sprint(n) {
		t.Errorf("tasks differ:\nold   %+v\nfresh %+v", o, n)
	}
	// The new cluster takes writes.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := fresh.admin.PutKV(ctx, vaultTenant, "cfg", "after-restore", client.PutKVRequest{Value: json.RawMessage(`true`)}); err != nil {
		t.Errorf("a write on the restored cluster: %v", err)
	}
}

// TestComposeRecoverLastSurvivor removes two of three members for good
// (containers and data volumes), runs `batond recover` on the third's
// volume in a one-shot container, starts it alone and checks that it
// elects itself, serves its old data and takes writes. (docs/operations.md
// "Losing quorum for good".)
func TestComposeRecoverLastSurvivor(t *testing.T) {
	requireDocker(t)
	s := newStack(t)
	s.up(three)
	// The survivor is a follower, and every write goes through it: an
	// upload leaves the chunk bodies on the node that took it.
	lead := s.leader(three, 10*time.Second)
	var survivor string
	var lost []string
	for _, n := range three {
		if n != lead && survivor == "" {
			survivor = n
		} else {
			lost = append(lost, n)
		}
	}
	one := s.client(s.url(survivor))
	smp := writeSample(t, one)
	s.converge(three, 60*time.Second)
	before, err := s.view(context.Background(), survivor)
	if err != nil {
		t.Fatal(err)
	}

	// The lost members are gone for good, their data with them.
	s.composeRun(s.files[:1], append([]string{"rm", "--stop", "--force", "-v"}, lost...)...)
	for _, n := range lost {
		s.docker("volume", "rm", s.project+"_"+n+"-data")
	}
	// Alone, the survivor cannot commit.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	alone, err := client.New(client.Config{Endpoints: []string{s.url(survivor)}, Token: s.token, CAFile: s.caFile,
		Timeout: time.Second, MaxRetry: 2 * time.Second, NoSession: true})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	_, err = alone.PutKV(ctx, vaultTenant, "cfg", "without-quorum", client.PutKVRequest{Value: json.RawMessage(`1`)})
	cancel()
	if err == nil {
		t.Fatalf("%s alone acknowledged a write before recovery", survivor)
	}

	s.composeRun(s.files[:1], "stop", "--timeout", "10", survivor)
	// (docker-compose 1.29's run creates every volume of the project: the
	// lost members' come back empty, mounted by nothing.)
	out := s.oneShot(survivor, nil, "recover", "--data-dir", "/data", "--id", survivor, "--peers", survivor+"="+survivor+":8001")
	if !strings.Contains(out, "recovered "+survivor) {
		t.Fatalf("batond recover said %q", out)
	}
	t.Logf("batond recover: %s", strings.TrimSpace(out))
	s.docker("start", s.id(survivor))

	// It elects itself, alone in the configuration.
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := s.view(context.Background(), survivor)
		if err == nil && st.State == "Leader" && len(st.Members) == 1 && st.Members[0].ID == survivor {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after recovery: %+v, %v; want it leading alone", survivor, st, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.waitReady(survivor, 30*time.Second)
	checkSample(t, one, []string{s.url(survivor)}, smp)
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if _, err := one.PutKV(wctx, vaultTenant, "cfg", "after-recovery", client.PutKVRequest{Value: json.RawMessage(`1`)}); err != nil {
		t.Fatalf("a write on the recovered %s: %v", survivor, err)
	}
	if _, err := one.CreateTask(wctx, vaultTenant, client.CreateTaskRequest{TaskID: "after", Queue: "build"}); err != nil {
		t.Errorf("a task on the recovered %s: %v", survivor, err)
	}
	st, err := s.view(context.Background(), survivor)
	if err != nil {
		t.Fatal(err)
	}
	if st.AppliedIndex <= before.AppliedIndex {
		t.Errorf("applied %d after recovery and writes, was %d before", st.AppliedIndex, before.AppliedIndex)
	}
	if e, err := one.GetKV(wctx, vaultTenant, "cfg", "after-recovery"); err != nil || string(e.Value) != "1" {
		t.Errorf("the write after recovery: %v, %v", e, err)
	}
}
