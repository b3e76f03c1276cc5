package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

// Black-box tests of concurrency.Mutex and concurrency.Election
// (docs/sdk.md) against real three-node clusters: mutual exclusion over
// many rounds, a paused holder's writes fenced after a takeover, leader
// handover on resignation and on a lost lease.

const lockTenant = "acme"

// gate is an HTTP transport that can be paused: while it is, every request
// of its client waits before being sent, as if the process were stopped
// (renewals included), and goes out when the gate opens, unless its context
// ended first.
type gate struct {
	base http.RoundTripper
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
}

func newGate() *gate {
	g := &gate{base: http.DefaultTransport.(*http.Transport).Clone(), open: make(chan struct{})}
	g.base.(*http.Transport).TLSClientConfig = e2eTLSConfig()
	close(g.open)
	return g
}

func (g *gate) RoundTrip(r *http.Request) (*http.Response, error) {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	return g.base.RoundTrip(r)
}

func (g *gate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *gate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
}

// agentClient is a client over every node with its own transport (gated when
// g is not nil), as a separate agent process would have.
func agentClient(t *testing.T, c *cluster.Cluster, g *gate) *client.Client {
	t.Helper()
	var rt http.RoundTripper
	if g != nil {
		rt = g
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = e2eTLSConfig()
		rt = tr
	}
	hc := &http.Client{Transport: rt}
	t.Cleanup(func() {
		if g != nil {
			g.base.(*http.Transport).CloseIdleConnections()
		} else {
			hc.CloseIdleConnections()
		}
	})
	cl, err := client.New(client.Config{Endpoints: c.Endpoints(), Token: c.AdminToken(), HTTPClient: hc,
		MaxRetry: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func newMutex(t *testing.T, cl *client.Client, name, owner string, lease time.Duration) *concurrency.Mutex {
	t.Helper()
	m, err := concurrency.NewMutex(cl, concurrency.MutexConfig{Tenant: lockTenant, Name: name, Owner: owner, Lease: lease, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMutexRaceNeverBothHold: two agents, each with its own client, take
// one Mutex in turns for many rounds. Nobody is ever inside while another
// is; every hold's token is larger than the previous hold's; and the shared
// counter, a KV entry each holder reads and writes back under its Fence
// (and the version it read), counts every round exactly once.
func TestMutexRaceNeverBothHold(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 120*time.Second)
	tasksAdmin(t, ctx, c)
	const agents, rounds = 2, 25
	var (
		inside  atomic.Int32
		mu      sync.Mutex
		lastTok uint64
		errs    []error
		wg      sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for a := range agents {
		cl := agentClient(t, c, nil)
		m := newMutex(t, cl, "lock.race", fmt.Sprintf("agent-%d", a), 3*time.Second)
		wg.Go(func() {
			for r := range rounds {
				l, err := m.Lock(ctx)
				if err != nil {
					fail(fmt.Errorf("agent %d round %d: Lock: %w", a, r, err))
					return
				}
				if n := inside.Add(1); n != 1 {
					fail(fmt.Errorf("agent %d round %d: %d holders inside at once", a, r, n))
				}
				mu.Lock()
				if l.Token() <= lastTok {
					errs = append(errs, fmt.Errorf("agent %d round %d: token %d after %d", a, r, l.Token(), lastTok))
				}
				lastTok = l.Token()
				mu.Unlock()
				if err := incrementUnder(ctx, cl, l); err != nil {
					fail(fmt.Errorf("agent %d round %d: %w", a, r, err))
				}
				inside.Add(-1)
				if err := m.Unlock(ctx); err != nil {
					fail(fmt.Errorf("agent %d round %d: Unlock: %w", a, r, err))
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	e, err := adminClient(t, c).GetKV(ctx, lockTenant, "locks", "counter")
	if err != nil || string(e.Value) != strconv.Itoa(agents*rounds) {
		t.Fatalf("counter: %+v, %v; want %d", e, err, agents*rounds)
	}
}

// incrementUnder adds one to the shared counter: a read, then a write back
// guarded by the hold's Fence and the version read.
func incrementUnder(ctx context.Context, cl *client.Client, l *concurrency.Lease) error {
	var n int
	var version uint64
	e, err := cl.GetKV(ctx, lockTenant, "locks", "counter")
	switch {
	case errors.Is(err, client.ErrNotFound):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(e.Value, &n); err != nil {
			return err
		}
		version = e.Version
	}
	return l.Guarded(ctx, func(ctx context.Context, fence client.Fence) error {
		_, err := cl.PutKV(ctx, lockTenant, "locks", "counter", client.PutKVRequest{
			Value: json.RawMessage(strconv.Itoa(n + 1)), ExpectVersion: &version, Fence: &fence})
		return err
	})
}

// TestMutexPausedHolderFenced: the holder is paused (every request of its
// client held back, renewals too) right after it checked its lease and
// started a guarded write. Its lease runs out on the cluster; the other
// agent's waiting Lock takes over with a larger token and writes. When the
// holder resumes, its write reaches the cluster with the old token and is
// refused as fenced; the holder's lease reports the loss, later guarded
// writes are refused without a request, and Unlock reports the loss too.
func TestMutexPausedHolderFenced(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 90*time.Second)
	admin := tasksAdmin(t, ctx, c)
	g := newGate()
	clA, clB := agentClient(t, c, g), agentClient(t, c, nil)
	const lease = 2 * time.Second
	mA, mB := newMutex(t, clA, "lock.pause", "agent-a", lease), newMutex(t, clB, "lock.pause", "agent-b", lease)

	lA, err := mA.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	put := func(cl *client.Client, l *concurrency.Lease, v string) error {
		return l.Guarded(ctx, func(ctx context.Context, fence client.Fence) error {
			_, err := cl.PutKV(ctx, lockTenant, "locks", "owner", client.PutKVRequest{Value: json.RawMessage(strconv.Quote(v)), Fence: &fence})
			return err
		})
	}
	if err := put(clA, lA, "a-before"); err != nil {
		t.Fatalf("A's write while holding: %v", err)
	}

	// Pause A between its lease check and its write reaching the cluster.
	g.pause()
	stale := make(chan error, 1)
	go func() { stale <- put(clA, lA, "a-stale") }()

	lB, err := mB.Lock(ctx) // wakes when A's lease runs out on the cluster
	if err != nil {
		t.Fatal(err)
	}
	if lB.Token() <= lA.Token() {
		t.Fatalf("B's token %d is not larger than A's %d", lB.Token(), lA.Token())
	}
	if err := put(clB, lB, "b"); err != nil {
		t.Fatalf("B's write: %v", err)
	}
	select {
	case <-lA.Lost():
	case <-time.After(lease):
		t.Fatal("A's lease not reported lost while its renewals are held back past its lease")
	}

	g.resume()
	if err := <-stale; !errors.Is(err, client.ErrFenced) {
		t.Fatalf("A's write after the takeover: got %v, want fenced", err)
	}
	if err := lA.Err(); !errors.Is(err, concurrency.ErrLeaseLost) {
		t.Errorf("A's lease: Err %v, want ErrLeaseLost", err)
	}
	sent := false
	err = lA.Guarded(ctx, func(ctx context.Context, fence client.Fence) error { sent = true; return nil })
	if sent || !errors.Is(err, concurrency.ErrLeaseLost) {
		t.Errorf("A's guarded write after the loss: sent %v, err %v; want refused locally", sent, err)
	}
	e, err := admin.GetKV(ctx, lockTenant, "locks", "owner")
	if err != nil || string(e.Value) != `"b"` {
		t.Fatalf("value after the takeover: %+v, %v; want B's", e, err)
	}
	if err := mA.Unlock(ctx); !errors.Is(err, concurrency.ErrLeaseLost) {
		t.Errorf("A's Unlock: %v, want ErrLeaseLost", err)
	}
	if err := mB.Unlock(ctx); err != nil {
		t.Errorf("B's Unlock: %v", err)
	}
	// A may lock again, and gets a token larger than B's.
	again, err := mA.Lock(ctx)
	if err != nil || again.Token() <= lB.Token() {
		t.Fatalf("A's Lock again: %v, %v; want a token above %d", again, err, lB.Token())
	}
	if err := mA.Unlock(ctx); err != nil {
		t.Error(err)
	}
}

// TestElectionHandover: three contenders campaign; an observer watches.
// The first leader proclaims a new value, then resigns: a waiting
// contender is elected at once. That leader is then paused (its renewals
// held back): the last contender is elected when its lease runs out, and
// the paused one's Proclaim is refused. Leader reports each in turn, and
// the observer sees every leader and value in order, with growing tokens.
func TestElectionHandover(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 90*time.Second)
	admin := tasksAdmin(t, ctx, c)
	const lease = 2 * time.Second
	gates := []*gate{newGate(), newGate(), newGate()}
	elections := make([]*concurrency.Election, 3)
	for i := range elections {
		e, err := concurrency.NewElection(agentClient(t, c, gates[i]), concurrency.MutexConfig{Tenant: lockTenant, Name: "elect.main",
			Owner: fmt.Sprintf("cand-%d", i), Lease: lease, Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		elections[i] = e
	}
	watcher, err := concurrency.NewElection(admin, concurrency.MutexConfig{Tenant: lockTenant, Name: "elect.main"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watcher.Leader(ctx); !errors.Is(err, concurrency.ErrElectionNoLeader) {
		t.Fatalf("Leader before any campaign: %v, want ErrElectionNoLeader", err)
	}
	octx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	observed := watcher.Observe(octx)

	first, err := elections[0].Campaign(ctx, "v0")
	if err != nil {
		t.Fatal(err)
	}
	wantLeader(t, ctx, watcher, "cand-0", "v0")
	if err := elections[0].Proclaim(ctx, "v0b"); err != nil {
		t.Fatal(err)
	}
	wantLeader(t, ctx, watcher, "cand-0", "v0b")

	// Two more campaign; they wait.
	type won struct {
		i   int
		l   *concurrency.Lease
		err error
	}
	wins := make(chan won, 2)
	for i := 1; i < 3; i++ {
		go func() {
			l, err := elections[i].Campaign(ctx, fmt.Sprintf("v%d", i))
			wins <- won{i, l, err}
		}()
	}
	// Resign: a waiting contender is elected at once.
	if err := elections[0].Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(first.Err(), concurrency.ErrLeaseReleased) {
		t.Errorf("first leadership after Resign: %v, want released", first.Err())
	}
	w1 := <-wins
	if w1.err != nil {
		t.Fatal(w1.err)
	}
	wantLeader(t, ctx, watcher, fmt.Sprintf("cand-%d", w1.i), fmt.Sprintf("v%d", w1.i))
	if err := elections[0].Proclaim(ctx, "late"); !errors.Is(err, concurrency.ErrElectionNotLeader) {
		t.Errorf("Proclaim after Resign: %v, want ErrElectionNotLeader", err)
	}

	// Pause the second leader: the last contender is elected when its
	// lease runs out, and its Proclaim afterwards is refused.
	gates[w1.i].pause()
	w2 := <-wins
	if w2.err != nil {
		t.Fatal(w2.err)
	}
	if w2.l.Token() <= w1.l.Token() {
		t.Errorf("third leader's token %d is not above the second's %d", w2.l.Token(), w1.l.Token())
	}
	wantLeader(t, ctx, watcher, fmt.Sprintf("cand-%d", w2.i), fmt.Sprintf("v%d", w2.i))
	select {
	case <-w1.l.Lost():
	case <-time.After(lease):
		t.Fatal("the paused leader's lease not reported lost")
	}
	gates[w1.i].resume()
	if err := elections[w1.i].Proclaim(ctx, "stale"); !errors.Is(err, concurrency.ErrLeaseLost) {
		t.Errorf("the deposed leader's Proclaim: %v, want ErrLeaseLost", err)
	}
	wantLeader(t, ctx, watcher, fmt.Sprintf("cand-%d", w2.i), fmt.Sprintf("v%d", w2.i))

	// The observer saw every leader and value, in order.
	want := []string{"cand-0=v0", "cand-0=v0b", fmt.Sprintf("cand-%d=v%d", w1.i, w1.i), fmt.Sprintf("cand-%d=v%d", w2.i, w2.i)}
	var lastTok uint64
	for k, w := range want {
		select {
		case li := <-observed:
			if got := li.Owner + "=" + li.Value; got != w || li.Token < lastTok {
				t.Fatalf("observed leader %d: %s token %d (previous token %d), want %s", k, got, li.Token, lastTok, w)
			}
			lastTok = li.Token
		case <-time.After(10 * time.Second):
			t.Fatalf("observed %d leaders, want %v", k, want)
		}
	}
	for _, i := range []int{w1.i, w2.i} {
		if err := elections[i].Resign(ctx); err != nil && i == w2.i {
			t.Errorf("last leader's Resign: %v", err)
		}
	}
	if _, err := watcher.Leader(ctx); !errors.Is(err, concurrency.ErrElectionNoLeader) {
		t.Errorf("Leader after every resignation: %v, want ErrElectionNoLeader", err)
	}
	stopObserving()
	for range observed { // closed once the observer stops
	}
}

func wantLeader(t *testing.T, ctx context.Context, e *concurrency.Election, owner, value string) {
	t.Helper()
	li, err := e.Leader(ctx)
	if err != nil || li.Owner != owner || li.Value != value {
		t.Fatalf("Leader: %+v, %v; want %s with %q", li, err, owner, value)
	}
}

// helperEnv makes the test binary a helper process: TestMutexHelperProcess
// runs, with the cluster's endpoints, token and CA in the other BATON_E2E_
// variables.
const helperEnv = "BATON_E2E_HELPER"

// TestMutexStoppedHolderFenced: the holder is another process, which writes
// under its hold's Fence in a loop without looking at its lease (the worst
// case). It is frozen with SIGSTOP; the other agent's Lock takes over when
// the frozen holder's lease runs out, and writes. Resumed with SIGCONT,
// the holder's next write reaches the cluster with the old token and is
// refused as fenced, naming the new holder's token; the value stays the new
// holder's.
func TestMutexStoppedHolderFenced(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 90*time.Second)
	admin := tasksAdmin(t, ctx, c)

	helper := exec.Command(os.Args[0], "-test.run=^TestMutexHelperProcess$", "-test.count=1", "-test.v")
	helper.Env = append(os.Environ(), helperEnv+"=1", "BATON_E2E_ENDPOINTS="+strings.Join(c.Endpoints(), ","),
		"BATON_E2E_TOKEN="+c.AdminToken(), "BATON_E2E_CA="+c.CAFile())
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{}) // closed once the helper was waited for
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		waitErr = helper.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = helper.Process.Signal(syscall.SIGCONT)
		_ = helper.Process.Kill()
		for range lines {
		}
		<-exited
	})
	expect := func(prefix string) string {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("helper ended before printing %q", prefix)
				}
				if rest, found := strings.CutPrefix(l, prefix); found {
					return rest
				}
			case <-ctx.Done():
				t.Fatalf("no %q from the helper", prefix)
			}
		}
	}
	helperToken, _ := strconv.ParseUint(expect("locked "), 10, 64)
	expect("wrote ")
	if err := syscall.Kill(helper.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}

	m := newMutex(t, agentClient(t, c, nil), "lock.stopped", "agent-b", 2*time.Second)
	l, err := m.Lock(ctx) // wakes when the frozen holder's lease runs out on the cluster
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= helperToken {
		t.Fatalf("new holder's token %d is not above the frozen one's %d", l.Token(), helperToken)
	}
	if err := l.Guarded(ctx, func(ctx context.Context, fence client.Fence) error {
		_, err := admin.PutKV(ctx, lockTenant, "locks", "stopped", client.PutKVRequest{Value: json.RawMessage(`"b"`), Fence: &fence})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	if err := syscall.Kill(helper.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if current := expect("fenced "); current != strconv.FormatUint(l.Token(), 10) {
		t.Errorf("the resumed holder's write was refused with current_token %s, want the new holder's %d", current, l.Token())
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("helper: %v", waitErr)
		}
	case <-ctx.Done():
		t.Fatal("helper did not exit after being fenced")
	}
	e, err := admin.GetKV(ctx, lockTenant, "locks", "stopped")
	if err != nil || string(e.Value) != `"b"` {
		t.Fatalf("value after the resumed holder's write: %+v, %v; want the new holder's", e, err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Error(err)
	}
}

// TestMutexHelperProcess is the holder process of
// TestMutexStoppedHolderFenced; it skips unless started as one. It locks,
// then writes under its Fence every 20ms, straight to the cluster, and
// exits once a write is refused as fenced.
func TestMutexHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("only run as TestMutexStoppedHolderFenced's helper process")
	}
	ctx := ctxFor(t, 60*time.Second)
	cl, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv("BATON_E2E_ENDPOINTS"), ","),
		Token: os.Getenv("BATON_E2E_TOKEN"), CAFile: os.Getenv("BATON_E2E_CA"), MaxRetry: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m := newMutex(t, cl, "lock.stopped", "helper", 2*time.Second)
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("locked %d\n", l.Token())
	fence := l.Fence()
	for i := 0; ; i++ {
		_, err := cl.PutKV(ctx, lockTenant, "locks", "stopped", client.PutKVRequest{
			Value: json.RawMessage(strconv.Quote(fmt.Sprintf("helper-%d", i))), Fence: &fence})
		var e *client.Error
		switch {
		case err == nil:
			fmt.Printf("wrote %d\n", i)
		case errors.As(err, &e) && errors.Is(err, client.ErrFenced):
			current, _ := e.DetailUint("current_token")
			fmt.Printf("fenced %d\n", current)
			if err := m.Unlock(ctx); !errors.Is(err, concurrency.ErrLeaseLost) {
				t.Errorf("Unlock after the takeover: %v, want ErrLeaseLost", err)
			}
			return
		default:
			t.Fatalf("write %d: %v", i, err)
		}
		time.Sleep(20 * time.Millisecond) // the holder's pace of work
	}
}
