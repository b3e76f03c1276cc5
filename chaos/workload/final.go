package workload

import (
	"sort"
	"time"

	"github.com/baton-dev/baton/chaos/history"
)

// finalCaller is the caller of the read-back and of the final write: the
// agents' principal, no broken transport, a long retry budget.
func (w *Workload) finalCaller() (*caller, error) {
	c, err := w.newClient(w.token, nil, 20*time.Second)
	if err != nil {
		return nil, err
	}
	return &caller{w: w, id: FinalClient, c: c, final: true, prefix: "final"}, nil
}

// FinalWrite writes one register after healing; the run requires it to
// succeed: a healed cluster must take writes.
func (w *Workload) FinalWrite() (history.Op, error) {
	k, err := w.finalCaller()
	if err != nil {
		return history.Op{}, err
	}
	return k.kvPut(FinalNamespace+"/k", k.next("v"), nil, nil), nil
}

// readTwice retries a read whose outcome is unknown, once.
func readTwice(read func() history.Op) {
	if op := read(); op.Outcome == history.Unknown {
		read()
	}
}

// Final reads back, linearizably, everything the checkers compare with
// what was acknowledged: every task, register, fenced entry, ref and
// checkpoint head; the whole set; every checkpoint thread; the versions of
// every artifact published to; the task and entry of every handoff.
func (w *Workload) Final() error {
	k, err := w.finalCaller()
	if err != nil {
		return err
	}
	for _, task := range w.createdIDs() {
		readTwice(func() history.Op { return k.taskGet(task) })
		readTwice(func() history.Op { return k.kvGet(FencedNamespace + "/" + task) })
		readTwice(func() history.Op { return k.refGet(RefOf(task)) })
		readTwice(func() history.Op { return k.checkpointHead(ThreadOf(task)) })
		readTwice(func() history.Op { return k.checkpointList(ThreadOf(task)) })
	}
	for i := range w.cfg.Registers {
		key := RegNamespace + "/" + RegKey(i)
		readTwice(func() history.Op { return k.kvGet(key) })
	}
	readTwice(func() history.Op { return k.kvList(SetNamespace) })
	w.mu.Lock()
	names := sortedKeys(w.artifacts)
	handoffs := sortedKeys(w.handoffs)
	w.mu.Unlock()
	for _, name := range names {
		readTwice(func() history.Op { return k.artifactVersions(name) })
	}
	for _, task := range handoffs {
		readTwice(func() history.Op { return k.taskGet(task) })
		readTwice(func() history.Op { return k.kvGet(HandNamespace + "/" + task) })
	}
	w.finalCoord(k)
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
