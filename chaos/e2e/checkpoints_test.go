package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

// TestCheckpointLangGraphSaver drives a three-node cluster the way a
// LangGraph checkpointer (BaseCheckpointSaver) does, through the Go SDK
// and a follower, with a principal that holds only a checkpoints grant:
// put, put_writes, get_tuple, list with filter, before and limit, and
// delete_thread, over two namespaces (the default one and a subgraph's)
// of threads named by e-mail addresses and ids with spaces, slashes,
// unicode and "..". One checkpoint is 5 MiB, over the 1 MiB request
// limit: the SDK stores it through the chunk store, every node then
// answers it whole, and get_tuple and list return every byte.
func TestCheckpointLangGraphSaver(t *testing.T) {
	t.Parallel() // see doc.go: no timing asserted
	c := startCluster(t, 3)
	ctx := ctxFor(t, 90*time.Second)
	admin := adminClient(t, c)
	const tenant = "graphs"
	stateTenant(t, ctx, admin, tenant)
	p, err := admin.CreatePrincipal(ctx, tenant, "saver", []client.Grant{{Resource: "checkpoints", Prefix: "", Actions: []string{"read", "write", "delete"}}})
	if err != nil {
		t.Fatal(err)
	}
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	saver := stateClient(t, p.Token, c.URL(foundationOthers(c, leader)[0]))

	big := bigCheckpointData(5 << 20)
	threads := []string{"user@example.com", "team alpha/run 7", "ünïcødé 🎉", ".."}
	namespaces := []string{"", "agent:5f1c|tools:9"}
	meta := func(source string, step int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"source":%q,"step":%d,"writes":null}`, source, step))
	}
	for _, th := range threads {
		for _, ns := range namespaces {
			// put: an input checkpoint, then two loop steps; the last is
			// the large one in one (thread, namespace).
			data3 := json.RawMessage(`{"channel_values":{"messages":["hi","hello","bye"]}}`)
			if th == threads[0] && ns == namespaces[1] {
				data3 = big
			}
			steps := []struct {
				id, parent string
				data       json.RawMessage
				meta       json.RawMessage
			}{
				{"1ef-01", "", json.RawMessage(`{"channel_values":{"messages":[]}}`), meta("input", -1)},
				{"1ef-02", "1ef-01", json.RawMessage(`{"channel_values":{"messages":["hi"]}}`), meta("loop", 0)},
				{"1ef-03", "1ef-02", data3, meta("loop", 1)},
			}
			for _, s := range steps {
				cp, err := saver.PutCheckpoint(ctx, tenant, th, s.id, client.PutCheckpointRequest{NS: ns, ParentID: s.parent, Data: s.data, Metadata: s.meta})
				if err != nil {
					t.Fatalf("put %s in %q/%q: %v", s.id, th, ns, err)
				}
				if cp.ThreadID != th || cp.CheckpointNS != ns || cp.CheckpointID != s.id || !jsonEqual(cp.Data, s.data) {
					t.Fatalf("put %s in %q/%q answered thread %q ns %q id %s, %d bytes of data", s.id, th, ns, cp.ThreadID, cp.CheckpointNS, cp.CheckpointID, len(cp.Data))
				}
			}
			// put_writes: idempotent per (checkpoint, task).
			for range 2 {
				if err := saver.PutWrites(ctx, tenant, th, "1ef-02", client.PutWritesRequest{NS: ns, TaskID: "task-a",
					Writes: []client.Write{{Channel: "messages", Value: json.RawMessage(`"hello"`)}}}); err != nil {
					t.Fatalf("put_writes in %q/%q: %v", th, ns, err)
				}
			}
		}
	}

	for _, th := range threads {
		for _, ns := range namespaces {
			where := fmt.Sprintf("%q/%q", th, ns)
			wantData3 := json.RawMessage(`{"channel_values":{"messages":["hi","hello","bye"]}}`)
			if th == threads[0] && ns == namespaces[1] {
				wantData3 = big
			}
			// get_tuple without a checkpoint id: the head, whole.
			latest, err := saver.LatestCheckpointNS(ctx, tenant, th, ns)
			if err != nil || latest.CheckpointID != "1ef-03" || latest.ParentID != "1ef-02" || !jsonEqual(latest.Data, wantData3) {
				t.Fatalf("get_tuple latest of %s: %v %+v", where, err, summary(latest))
			}
			// get_tuple of a checkpoint: with its pending writes.
			cp, err := saver.GetCheckpointNS(ctx, tenant, th, ns, "1ef-02")
			if err != nil || len(cp.PendingWrites) != 1 || cp.PendingWrites[0].TaskID != "task-a" {
				t.Fatalf("get_tuple 1ef-02 of %s: %v %+v", where, err, summary(cp))
			}
			// list: filter, before and limit as LangGraph passes them.
			for _, q := range []struct {
				opts client.ListCheckpointsOptions
				want []string
			}{
				{client.ListCheckpointsOptions{}, []string{"1ef-03", "1ef-02", "1ef-01"}},
				{client.ListCheckpointsOptions{Filter: map[string]any{"source": "loop"}}, []string{"1ef-03", "1ef-02"}},
				{client.ListCheckpointsOptions{Filter: map[string]any{"source": "loop", "step": 0}}, []string{"1ef-02"}},
				{client.ListCheckpointsOptions{Filter: map[string]any{"source": "loop"}, Before: "1ef-03"}, []string{"1ef-02"}},
				{client.ListCheckpointsOptions{Limit: 1}, []string{"1ef-03"}},
				{client.ListCheckpointsOptions{Filter: map[string]any{"source": "update"}}, nil},
			} {
				q.opts.NS = ns
				list, err := saver.ListCheckpoints(ctx, tenant, th, q.opts)
				if err != nil || !slices.Equal(checkpointIDs(list), q.want) {
					t.Fatalf("list %s %+v: %v %v, want %v", where, q.opts, err, checkpointIDs(list), q.want)
				}
				if len(list) > 0 && list[0].CheckpointID == "1ef-03" && !jsonEqual(list[0].Data, wantData3) {
					t.Fatalf("list %s: the head's data is %d bytes, want %d", where, len(list[0].Data), len(wantData3))
				}
			}
		}
	}

	// Every node holds the large checkpoint's chunks and answers it whole.
	if _, err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range c.Size() {
		cp, err := nodeClient(t, c, i, p.Token).GetCheckpointNS(ctx, tenant, threads[0], namespaces[1], "1ef-03", client.Stale())
		if err != nil || !jsonEqual(cp.Data, big) || len(cp.DataChunks) < 2 {
			t.Fatalf("%s: the large checkpoint, stale: %v, %d bytes in %d chunks", c.ID(i), err, len(cp.Data), len(cp.DataChunks))
		}
	}

	// list with no checkpoint_ns: every namespace of a thread; with no
	// thread: every thread, the large checkpoint's data read whole.
	if list, err := saver.ListTenantCheckpoints(ctx, tenant, client.ListTenantCheckpointsOptions{Thread: &threads[1], Limit: 1000}); err != nil || len(list) != 3*len(namespaces) {
		t.Fatalf("list of every namespace of %q: %v, %d checkpoints", threads[1], err, len(list))
	}
	all, err := saver.ListTenantCheckpoints(ctx, tenant, client.ListTenantCheckpointsOptions{Limit: 1000, PendingWrites: true})
	if err != nil || len(all) != 3*len(namespaces)*len(threads) {
		t.Fatalf("list of every thread: %v, %d checkpoints, want %d", err, len(all), 3*len(namespaces)*len(threads))
	}
	for _, cp := range all {
		if cp.CheckpointID == "1ef-03" && cp.ThreadID == threads[0] && cp.CheckpointNS == namespaces[1] && !jsonEqual(cp.Data, big) {
			t.Fatalf("the large checkpoint in the list of every thread: %d bytes", len(cp.Data))
		}
	}

	// copy_thread: every namespace, the pending writes and the large
	// checkpoint's chunks, which the copy keeps after its source is gone.
	const copied = "copy of the first thread"
	if n, err := saver.CopyThread(ctx, tenant, threads[0], copied, nil); err != nil || n != 3*len(namespaces) {
		t.Fatalf("copy_thread: %d checkpoints, %v; want %d", n, err, 3*len(namespaces))
	}

	// delete_thread: every namespace of that thread, and nothing else.
	if err := saver.DeleteThread(ctx, tenant, threads[0], nil); err != nil {
		t.Fatal(err)
	}
	if cp, err := saver.GetCheckpointNS(ctx, tenant, copied, namespaces[1], "1ef-02"); err != nil || len(cp.PendingWrites) != 1 {
		t.Fatalf("the copy's 1ef-02 after its source's delete: %v %+v", err, summary(cp))
	}
	// prune(keep_latest): each namespace of the copy keeps its head, whole.
	if n, err := saver.PruneThreads(ctx, tenant, []string{copied, "no such thread"}, true); err != nil || n != 2*len(namespaces) {
		t.Fatalf("prune keep_latest: %d deleted, %v; want %d", n, err, 2*len(namespaces))
	}
	for _, ns := range namespaces {
		list, err := saver.ListCheckpoints(ctx, tenant, copied, client.ListCheckpointsOptions{NS: ns})
		if err != nil || !slices.Equal(checkpointIDs(list), []string{"1ef-03"}) {
			t.Fatalf("the copy's namespace %q after prune: %v %v", ns, err, checkpointIDs(list))
		}
	}
	if cp, err := saver.GetCheckpointNS(ctx, tenant, copied, namespaces[1], "1ef-03"); err != nil || !jsonEqual(cp.Data, big) {
		t.Fatalf("the copy's large checkpoint after prune and its source's delete: %v, %d bytes", err, len(cp.Data))
	}
	if n, err := saver.PruneThreads(ctx, tenant, []string{copied}, false); err != nil || n != len(namespaces) {
		t.Fatalf("prune delete: %d deleted, %v; want %d", n, err, len(namespaces))
	}
	for _, ns := range namespaces {
		if _, err := saver.LatestCheckpointNS(ctx, tenant, threads[0], ns); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("get_tuple of the deleted thread's namespace %q: %v, want ErrNotFound", ns, err)
		}
		if list, err := saver.ListCheckpoints(ctx, tenant, threads[0], client.ListCheckpointsOptions{NS: ns}); err != nil || len(list) != 0 {
			t.Errorf("list of the deleted thread's namespace %q: %v %v", ns, err, checkpointIDs(list))
		}
	}
	for _, th := range threads[1:] {
		if list, err := saver.ListCheckpoints(ctx, tenant, th, client.ListCheckpointsOptions{NS: namespaces[1]}); err != nil || len(list) != 3 {
			t.Errorf("thread %q after another's delete: %v %v", th, err, checkpointIDs(list))
		}
	}
	if err := saver.DeleteThread(ctx, tenant, threads[0], nil); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("delete_thread again: %v, want ErrNotFound", err)
	}
}

// bigCheckpointData is n bytes or so of JSON that does not compress to
// repeats: a message list of random words.
func bigCheckpointData(n int) json.RawMessage {
	rng := rand.New(rand.NewPCG(7, 11))
	var b bytes.Buffer
	b.WriteString(`{"channel_values":{"messages":[`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%d %x %x"`, i, rng.Uint64(), rng.Uint64())
	}
	b.WriteString(`]}}`)
	return b.Bytes()
}

func jsonEqual(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

func checkpointIDs(list []client.Checkpoint) (ids []string) {
	for _, cp := range list {
		ids = append(ids, cp.CheckpointID)
	}
	return ids
}

// summary is a checkpoint for a failure message, without its data.
func summary(cp *client.Checkpoint) string {
	if cp == nil {
		return "<nil>"
	}
	return fmt.Sprintf("{thread %q ns %q id %s parent %s data %d bytes, %d chunks, writes %v}", cp.ThreadID, cp.CheckpointNS,
		cp.CheckpointID, cp.ParentID, len(cp.Data), len(cp.DataChunks), strings.TrimSpace(fmt.Sprint(cp.PendingWrites)))
}
