package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
	"github.com/baton-dev/baton/server/core/tlsconf"
)

// backupWrite writes KV entries, tasks and two artifacts of several chunks
// each into tenant acme, and returns the artifacts' manifests and bytes.
func backupWrite(t *testing.T, ctx context.Context, cl *client.Client) (map[string][]byte, []*client.Manifest) {
	t.Helper()
	kv := map[string][]byte{}
	for i := range 5 {
		key, val := fmt.Sprintf("k%d", i), []byte(fmt.Sprintf(`{"n":%d}`, i))
		if _, err := cl.PutKV(ctx, artTenant, "cfg", key, client.PutKVRequest{Value: val}); err != nil {
			t.Fatal(err)
		}
		kv[key] = val
	}
	for i := range 4 {
		if _, err := cl.CreateTask(ctx, artTenant, client.CreateTaskRequest{TaskID: fmt.Sprintf("t%d", i), Queue: "build",
			Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	var ms []*client.Manifest
	for i, size := range []int{3<<20 + 12345, 700 << 10} {
		m, err := cl.UploadArtifact(ctx, artTenant, fmt.Sprintf("art-%d", i), bytes.NewReader(artContent(uint64(i+1), size)), client.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return kv, ms
}

// convergedStatus waits until every running node has applied the same
// index and returns node 0's status.
func convergedStatus(t *testing.T, ctx context.Context, c *cluster.Cluster) *cluster.NodeStatus {
	t.Helper()
	if _, err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// runBatond runs a batond subcommand and returns its stdout.
func runBatond(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, batond, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("batond %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// startSeeded starts a cluster on ports picked before its data dirs were
// seeded (by batond restore).
func startSeeded(t *testing.T, base, token string, httpPorts, raftPorts []int) *cluster.Cluster {
	t.Helper()
	cfg := cluster.Config{Binary: batond, BaseDir: base, Fast: true, Nodes: len(httpPorts), AdminToken: token,
		HTTPPorts: httpPorts, RaftPorts: raftPorts, TLS: e2eTLS}
	if cfg.TLS && e2eCA != nil {
		caCert, caKey := tlsconf.CAFiles(filepath.Join(base, "tls"))
		if err := os.MkdirAll(filepath.Dir(caCert), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(caCert, e2eCA.CertPEM, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(caKey, e2eCA.KeyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i := range len(httpPorts) {
				t.Logf("--- log of restored %s:\n%s", cluster.NodeID(i), c.LogTail(i, 40))
			}
		}
		c.Close()
	})
	ctx := ctxFor(t, 60*time.Second)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBackupRestoreIntoNewCluster writes tasks, KV and artifacts, backs the
// cluster up with `baton backup save`, restores the file into three empty
// data dirs with `batond restore`, starts them as a new cluster on other
// ports, and checks the state and every artifact's bytes on every node.
// (docs/operations.md "Backup and restore".)
func TestBackupRestoreIntoNewCluster(t *testing.T) {
	t.Parallel() // see doc.go: no timing asserted
	bin := buildBatonCLI(t)
	old, admin, ctx := artSetup(t, 3)
	kv, manifests := backupWrite(t, ctx, admin)
	contents := map[string][]byte{}
	for i, m := range manifests {
		contents[m.Name] = artContent(uint64(i+1), int(m.Size))
	}
	before := convergedStatus(t, ctx, old)

	file := filepath.Join(t.TempDir(), "cluster.backup")
	cr := cliRunner{bin: bin, endpoints: strings.Join(old.Endpoints(), ",")}
	r := cr.run(t, old.AdminToken(), "backup", "save", file, "--progress")
	if r.code != 0 || !strings.Contains(r.stdout, "verified") || !strings.Contains(r.stderr, "backup [") {
		t.Fatalf("baton backup save: %v\nwant exit 0, a summary and a progress bar", r)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".*part*")); len(left) > 0 {
		t.Errorf("temporary files left beside the backup: %v", left)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := client.VerifyBackup(f)
	f.Close()
	if err != nil {
		t.Fatalf("the saved file does not verify: %v", err)
	}
	var wantChunks int64
	for _, m := range manifests {
		wantChunks += int64(len(m.Chunks))
	}
	if sum.Header.Chunks < wantChunks {
		t.Errorf("the backup holds %d chunks, the artifacts name %d", sum.Header.Chunks, wantChunks)
	}
	// Nothing was written since the convergence: the backup is that state.
	after := convergedStatus(t, ctx, old)
	if after.AppliedIndex == before.AppliedIndex &&
		(sum.Header.StateDigest != before.StateDigest || sum.Header.AppliedIndex != before.AppliedIndex) {
		t.Errorf("backup of %s at %d; the cluster was at %s, %d", sum.Header.StateDigest, sum.Header.AppliedIndex,
			before.StateDigest, before.AppliedIndex)
	}
	if err := old.Stop(); err != nil {
		t.Fatal(err)
	}

	// Three empty data dirs, on ports the old cluster never used.
	ports, err := cluster.FreePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	httpPorts, raftPorts := ports[:3], ports[3:]
	base := t.TempDir()
	peers := cluster.PeersFlag(raftPorts)
	digestRE := regexp.MustCompile(`state (sha256:[0-9a-f]{64}) at index (\d+) \(verified\)`)
	for i := range 3 {
		id := cluster.NodeID(i)
		out := runBatond(t, "restore", "--from", file, "--data-dir", filepath.Join(base, id, "data"), "--id", id, "--peers", peers)
		m := digestRE.FindStringSubmatch(out)
		if m == nil || m[1] != sum.Header.StateDigest || m[2] != fmt.Sprint(sum.Header.AppliedIndex) {
			t.Fatalf("batond restore %s said %q; want state %s at index %d", id, out, sum.Header.StateDigest, sum.Header.AppliedIndex)
		}
	}
	nc := startSeeded(t, base, old.AdminToken(), httpPorts, raftPorts)
	for i := range 3 {
		st := waitStatus(t, nc, i, 20*time.Second, "the restored snapshot", func(s *cluster.NodeStatus) bool {
			return s.RestoredSnapshotIndex == sum.Header.AppliedIndex && s.AppliedIndex > sum.Header.AppliedIndex
		})
		if st.RestoredSnapshotIndex != sum.Header.AppliedIndex {
			t.Errorf("%s restored index %d, want %d", nc.ID(i), st.RestoredSnapshotIndex, sum.Header.AppliedIndex)
		}
	}
	// The new members agree with each other: every replica has the same
	// state digest at the same index.
	if _, err := nc.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}

	nadmin := adminClient(t, nc)
	for key, val := range kv {
		e, err := nadmin.GetKV(ctx, artTenant, "cfg", key)
		if err != nil {
			t.Fatalf("kv %s after restore: %v", key, err)
		}
		if !bytes.Equal(e.Value, val) {
			t.Errorf("kv %s: %s after restore, want %s", key, e.Value, val)
		}
	}
	tasks, err := nadmin.ListTasks(ctx, artTenant, client.ListTasksOptions{Queue: "build"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks.Tasks) != 4 {
		t.Errorf("%d tasks after restore, want 4", len(tasks.Tasks))
	}
	for _, m := range manifests {
		for i := range 3 {
			artReadOn(t, nc, i, m, contents[m.Name])
		}
	}
	// The cluster takes writes.
	if _, err := nadmin.PutKV(ctx, artTenant, "cfg", "after", client.PutKVRequest{Value: []byte(`true`)}); err != nil {
		t.Fatal(err)
	}
}

// TestRecoverLastSurvivor loses two of three members for good and brings
// the third back alone with `batond recover`: its data is all there and it
// serves writes as a one-node cluster. (docs/operations.md "Losing quorum
// for good".)
func TestRecoverLastSurvivor(t *testing.T) {
	t.Parallel() // see doc.go: no timing asserted
	c, admin, ctx := artSetup(t, 3)
	kv, manifests := backupWrite(t, ctx, admin)
	st := convergedStatus(t, ctx, c)
	// An upload returns once a majority holds each chunk; the survivor
	// must hold every body before its peers go for good.
	for _, m := range manifests {
		artWaitHolds(t, c, 0, m)
	}
	for i := range 3 {
		if err := c.StopNode(i); err != nil {
			t.Fatal(err)
		}
	}
	// n2 and n3 are gone for good.
	for _, i := range []int{1, 2} {
		if err := os.RemoveAll(c.DataDir(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Without recovery the survivor cannot elect itself.
	out := runBatond(t, "recover", "--data-dir", c.DataDir(0), "--id", c.ID(0), "--peers", c.ID(0)+"="+c.RaftAddr(0))
	if !strings.Contains(out, "recovered "+c.ID(0)) {
		t.Fatalf("batond recover said %q", out)
	}
	if err := c.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if l, err := c.WaitLeader(ctx, 0); err != nil || l != 0 {
		t.Fatalf("leader %d, %v; want the survivor", l, err)
	}
	one := nodeClient(t, c, 0, c.AdminToken())
	wctx := ctxFor(t, 30*time.Second)
	artWait(t, 20*time.Second, "a write on the survivor", func() (bool, string) {
		_, err := one.PutKV(wctx, artTenant, "cfg", "after-recovery", client.PutKVRequest{Value: []byte(`1`)})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	status, err := one.Cluster(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(status.Members) != 1 || status.Members[0].ID != c.ID(0) {
		t.Errorf("members after recovery: %+v, want %s alone", status.Members, c.ID(0))
	}
	if status.AppliedIndex <= st.AppliedIndex {
		t.Errorf("applied %d after recovery and a write, was %d before", status.AppliedIndex, st.AppliedIndex)
	}
	for key, val := range kv {
		e, err := one.GetKV(wctx, artTenant, "cfg", key)
		if err != nil || !bytes.Equal(e.Value, val) {
			t.Errorf("kv %s after recovery: %v, %v", key, e, err)
		}
	}
	for i, m := range manifests {
		artReadOn(t, c, 0, m, artContent(uint64(i+1), int(m.Size)))
	}
	if _, err := one.CreateTask(wctx, artTenant, client.CreateTaskRequest{Queue: "build"}); err != nil {
		t.Errorf("a task after recovery: %v", err)
	}
}
