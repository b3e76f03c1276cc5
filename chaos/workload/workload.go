// Package workload runs simulated agents against a Baton cluster and
// records every operation they make in a history (chaos/history).
//
// The agents do what real agents do: workers claim tasks from a queue or by
// id, renew their leases, make fenced updates, write fenced KV entries,
// publish artifacts under their fencing token and move refs to them, append
// checkpoints, and hand work off in transactions; stale writers claim a
// task and then sleep past their lease on purpose before writing with their
// old token; KV agents read, write and compare-and-set registers and insert
// into a set; a reader reads everything linearizably. Some tasks have
// max_attempts, a backoff and a delay, most a retention; workers finish
// tasks (done) and fail attempts (sometimes non-retryably), a supervisor
// retries dead tasks, reopens and cancels some, and gives a slot whose
// task was purged a new one under a new id. Every write carries an
// Idempotency-Key chosen by the agent and recorded, and every client fails
// over between all endpoints.
//
// # Contracts
//
//   - Setup creates a fresh tenant, a principal for the agents and the
//     tasks; the agents use only that tenant, so a workload can run against
//     a cluster that holds other data.
//   - Run returns once every agent has stopped: after stop is closed, each
//     agent finishes the operation it is in (bounded by OpTimeout) and
//     starts no other.
//   - Every value written is unique in the run, so the checkers can tell
//     which write produced what a read saw.
//   - Every task id is created once, and used only once its create was
//     acknowledged; no task is deleted but by its retention.
//   - Final reads back everything the checkers compare with what was
//     acknowledged, and marks those operations Final.
package workload

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/chaos/history"
	"github.com/baton-dev/baton/client"
)

// Config describes a workload.
type Config struct {
	Endpoints  []string
	AdminToken string
	// Tenant is created by Setup; it should be new.
	Tenant string
	Seed   int64
	// Agents of each kind; zero values get the defaults of Defaults.
	Workers, StaleWriters, KVAgents, Readers, Supervisors int
	// Tasks are plain tasks; LifeTasks more tasks that use attempts,
	// backoff and delays (lifeTask); negative LifeTasks: none.
	Tasks, LifeTasks, Registers int
	// Lease of workers; stale writers take a third of it and sleep past it.
	Lease time.Duration
	// AttemptTimeout bounds one HTTP attempt, MaxRetry one call with its
	// failover; OpTimeout bounds an operation as a whole.
	AttemptTimeout, MaxRetry, OpTimeout time.Duration
	// Every agent with an odd id is impatient: its client gives up after
	// ImpatientAttempt per attempt and ImpatientRetry in all, so faults
	// leave operations whose outcome it does not know.
	ImpatientAttempt, ImpatientRetry time.Duration
	// Transport, when set, carries the agents' requests (not Setup's, not
	// Final's): tests put a broken middlebox here to show the checkers bite.
	Transport http.RoundTripper
	// TLS configures the clients' https (the cluster's CA); nil for a
	// plain-HTTP cluster.
	TLS *tls.Config
	// NoCoord leaves out the coordination agents (coord.go) and their
	// queues, tasks and schedules.
	NoCoord bool
	// LoseResponses is the fraction of the agents' writes whose answer is
	// thrown away after the server applied them (default 0.02; negative:
	// none), so that the client retries with the same Idempotency-Key.
	LoseResponses float64
}

// Defaults fills the zero fields of c.
func (c Config) Defaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Workers, 3)
	def(&c.StaleWriters, 1)
	def(&c.KVAgents, 2)
	def(&c.Readers, 1)
	def(&c.Supervisors, 1)
	def(&c.Tasks, 4)
	def(&c.LifeTasks, 4)
	def(&c.Registers, 3)
	if c.Lease == 0 {
		c.Lease = 900 * time.Millisecond
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = 1500 * time.Millisecond
	}
	if c.MaxRetry == 0 {
		c.MaxRetry = 4 * time.Second
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 6 * time.Second
	}
	if c.LoseResponses == 0 {
		c.LoseResponses = 0.02
	}
	if c.ImpatientAttempt == 0 {
		c.ImpatientAttempt = 300 * time.Millisecond
	}
	if c.ImpatientRetry == 0 {
		c.ImpatientRetry = 700 * time.Millisecond
	}
	return c
}

// Names shared by the workload and its read-back.
const (
	Queue        = "work"
	HandoffQueue = "handoff"
	RegNamespace = "reg"
	// FencedNamespace holds one entry per task, written only under the
	// task's fencing token.
	FencedNamespace = "fkv"
	SetNamespace    = "set"
	HandNamespace   = "hand"
	FinalNamespace  = "final"
	// FinalClient is the client id of the read-back after healing.
	FinalClient = 1000
	// SetupClient is the client id of the task creates of Setup.
	SetupClient = 1001
)

// Workload is one run's agents and what they recorded.
type Workload struct {
	cfg   Config
	rec   *history.Recorder
	token string // the agents' principal

	lost atomic.Int64 // answers thrown away by the lossy transport

	mu         sync.Mutex
	slots      []string        // the current task id of each slot (generations)
	gens       []int           // the generation of each slot's current id
	slotOf     map[string]int  // every task id created, to its slot
	artifacts  map[string]bool // names published to
	handoffs   map[string]bool // task ids of handoff transactions
	coordIDs   map[string]bool // task ids of the coordination agents (coord.go)
	waitpoints map[string]bool // waitpoint ids created (or perhaps)
	transports []*http.Transport
}

// New builds a workload; nothing runs until Setup and Run.
func New(cfg Config, rec *history.Recorder) *Workload {
	w := &Workload{cfg: cfg.Defaults(), rec: rec, slotOf: map[string]int{}, artifacts: map[string]bool{}, handoffs: map[string]bool{},
		coordIDs: map[string]bool{}, waitpoints: map[string]bool{}}
	for i := range w.taskCount() {
		w.slots = append(w.slots, TaskID(i))
		w.gens = append(w.gens, 1)
	}
	return w
}

// Config returns the workload's configuration, defaults applied.
func (w *Workload) Config() Config { return w.cfg }

// TaskID is the id of task slot i's first task.
func TaskID(i int) string { return fmt.Sprintf("t%d", i) }

// GenID is the id of generation g of slot i's task. A slot whose task has
// a retention gets a new task, under a new id, once the purge deleted the
// old one (Workload.recreate): an id is created once, so the versions of
// one id stay one sequence and a purged id never comes back.
func GenID(i, g int) string {
	if g <= 1 {
		return TaskID(i)
	}
	return fmt.Sprintf("t%d.g%d", i, g)
}

// current is the id of slot i's current task.
func (w *Workload) current(i int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.slots[i]
}

// retention is the retention of slot i's tasks (0: none).
func (w *Workload) retention(i int) time.Duration {
	if i < w.cfg.Tasks {
		return 0
	}
	return lifeTask("", i-w.cfg.Tasks, time.Time{}).Retention
}

// retains reports whether task has a retention: the purge may delete it.
func (w *Workload) retains(task string) bool {
	w.mu.Lock()
	i, ok := w.slotOf[task]
	w.mu.Unlock()
	return ok && w.retention(i) > 0
}

// created records that task, of slot i, was created (or may have been).
func (w *Workload) created(i int, task string) {
	w.mu.Lock()
	w.slotOf[task] = i
	w.mu.Unlock()
}

// createdIDs is every task id created, in order.
func (w *Workload) createdIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.slotOf))
	for id := range w.slotOf {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// taskCount is the number of tasks Setup creates: the plain ones, then
// the lifecycle ones.
func (w *Workload) taskCount() int { return w.cfg.Tasks + max(w.cfg.LifeTasks, 0) }

// lifeTask is the create of lifecycle task j (0-based among them): with
// max_attempts and a short backoff, so that failed attempts and expired
// leases make it dead within a run, and with a delay or an available_at,
// so that queue claims must wait for it. The checker (checker.Lifecycle)
// reads what the server made of these from the create's answer.
//
// Three of four have a retention of 2 to 5 s (docs/api.md "Retention"), so
// that done, dead and cancelled ones are purged within a run; the fourth
// has none, and must never disappear. A slot whose task was purged gets a
// new one (GenID).
func lifeTask(id string, j int, now time.Time) client.CreateTaskRequest {
	req := client.CreateTaskRequest{TaskID: id, Queue: Queue}
	switch j % 4 {
	case 0:
		req.MaxAttempts, req.BackoffInitial, req.BackoffMax = 3, 50*time.Millisecond, 400*time.Millisecond
		req.Retention = 2 * time.Second
	case 1:
		req.MaxAttempts, req.BackoffInitial, req.BackoffMax = 2, 100*time.Millisecond, 200*time.Millisecond
		req.Delay = 1500 * time.Millisecond
		req.Retention = 3 * time.Second
	case 2: // unlimited attempts: only a non-retryable failure makes it dead
		req.BackoffInitial, req.BackoffMax = 50*time.Millisecond, 100*time.Millisecond
		req.Delay = time.Second
		req.Retention = 5 * time.Second
	case 3: // no retention: dead or done, it stays
		at := now.Add(2 * time.Second)
		req.MaxAttempts, req.BackoffInitial, req.BackoffMax = 4, 100*time.Millisecond, 800*time.Millisecond
		req.AvailableAt = &at
	}
	return req
}

// RegKey is register i's key, without its namespace.
func RegKey(i int) string { return fmt.Sprintf("k%d", i) }

func (w *Workload) newClient(token string, transport http.RoundTripper, maxRetry time.Duration) (*client.Client, error) {
	return w.newClientTimeout(token, transport, w.cfg.AttemptTimeout, maxRetry)
}

func (w *Workload) newClientTimeout(token string, transport http.RoundTripper, attempt, maxRetry time.Duration) (*client.Client, error) {
	hc := &http.Client{}
	if transport != nil {
		hc.Transport = transport
	} else {
		t := w.newTransport()
		hc.Transport = t
		w.mu.Lock()
		w.transports = append(w.transports, t)
		w.mu.Unlock()
	}
	return client.New(client.Config{Endpoints: w.cfg.Endpoints, Token: token, HTTPClient: hc,
		Timeout: attempt, MaxRetry: maxRetry})
}

// Setup creates the tenant, the agents' principal and the tasks. It
// retries until ctx ends, so it may be called while the cluster settles.
func (w *Workload) Setup(ctx context.Context) error {
	admin, err := w.newClient(w.cfg.AdminToken, nil, 30*time.Second)
	if err != nil {
		return err
	}
	key := func(s string) client.RequestOption { return client.IdempotencyKey(w.cfg.Tenant + "-setup-" + s) }
	if _, err := admin.PutTenant(ctx, w.cfg.Tenant, key("tenant")); err != nil {
		return fmt.Errorf("workload: create tenant %s: %w", w.cfg.Tenant, err)
	}
	grants := []client.Grant{{Resource: "*", Prefix: "", Actions: []string{"read", "write", "delete"}}}
	p, err := admin.CreatePrincipal(ctx, w.cfg.Tenant, "agents", grants, key("principal"))
	if err != nil {
		return fmt.Errorf("workload: create principal: %w", err)
	}
	w.token = p.Token
	// The creates are recorded: their answers are the first version of
	// each task, with the available_at the server made of a delay.
	k := &caller{w: w, id: SetupClient, c: admin, prefix: "setup"}
	for i := range w.taskCount() {
		id := TaskID(i)
		req := client.CreateTaskRequest{TaskID: id, Queue: Queue}
		if i >= w.cfg.Tasks {
			req = lifeTask(id, i-w.cfg.Tasks, time.Now())
		}
		op := k.createTask(req, w.cfg.Tenant+"-setup-task-"+id)
		for op.Outcome == history.Unknown && ctx.Err() == nil {
			op = k.createTask(req, op.IdemKey)
		}
		if op.Outcome != history.OK {
			return fmt.Errorf("workload: create task %s: %s %s", id, op.Code, op.Err)
		}
		w.created(i, id)
	}
	if w.cfg.NoCoord {
		return nil
	}
	return w.setupCoord(ctx, admin)
}

// recreate gives slot i its next task once its current one, gone, was
// found purged: the create is recorded like Setup's, retried with its key
// while its outcome is unknown, and the new id becomes current only once
// the create is acknowledged (so no agent uses an id before it exists).
func (a *agent) recreate(i int, gone string) {
	w := a.w
	w.mu.Lock()
	if w.slots[i] != gone {
		w.mu.Unlock()
		return
	}
	g := w.gens[i] + 1
	w.mu.Unlock()
	id := GenID(i, g)
	req := lifeTask(id, i-w.cfg.Tasks, time.Now())
	op := a.createTask(req, a.next("create"))
	for op.Outcome == history.Unknown && !a.stopped() {
		op = a.createTask(req, op.IdemKey)
	}
	if op.Outcome == history.Unknown || op.Outcome == history.OK || op.Code == "already_exists" {
		w.created(i, id) // it may exist: the read-back reads it
	}
	if op.Outcome != history.OK && op.Code != "already_exists" {
		return
	}
	w.mu.Lock()
	w.slots[i], w.gens[i] = id, g
	w.mu.Unlock()
}

// Run runs the agents until stop is closed and returns when all stopped.
func (w *Workload) Run(stop <-chan struct{}) error {
	type spawn struct {
		n     int
		run   func(a *agent)
		coord bool
	}
	kinds := []spawn{
		{w.cfg.Workers, (*agent).worker, false},
		{w.cfg.StaleWriters, (*agent).staleWriter, false},
		{w.cfg.KVAgents, (*agent).kvAgent, false},
		{w.cfg.Readers, (*agent).reader, false},
		{w.cfg.Supervisors, (*agent).supervisor, false},
	}
	if !w.cfg.NoCoord { // coord.go
		kinds = append(kinds, spawn{1, (*agent).dagMaker, true}, spawn{2, (*agent).dagWorker, true},
			spawn{1, (*agent).canceller, true}, spawn{2, (*agent).flowAgent, true}, spawn{1, (*agent).rateAgent, true},
			spawn{1, (*agent).scheduler, true}, spawn{1, (*agent).parker, true})
	}
	var agents []*agent
	var runs []func(a *agent)
	id := 0
	for _, k := range kinds {
		for range k.n {
			attempt, retry := w.cfg.AttemptTimeout, w.cfg.MaxRetry
			if id%2 == 1 {
				attempt, retry = w.cfg.ImpatientAttempt, w.cfg.ImpatientRetry
			}
			c, err := w.newClientTimeout(w.token, w.agentTransport(id), attempt, retry)
			if err != nil {
				return err
			}
			a := newAgent(w, id, c, stop)
			a.coord = k.coord
			agents = append(agents, a)
			runs = append(runs, k.run)
			id++
		}
	}
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Go(func() { runs[i](a) })
	}
	wg.Wait()
	return nil
}

// agentTransport is agent id's transport: the configured one or a fresh
// one, losing answers when LoseResponses is positive.
func (w *Workload) agentTransport(id int) http.RoundTripper {
	base := w.cfg.Transport
	if base == nil {
		t := w.newTransport()
		w.mu.Lock()
		w.transports = append(w.transports, t)
		w.mu.Unlock()
		base = t
	}
	if w.cfg.LoseResponses <= 0 {
		return base
	}
	return &lossy{base: base, p: w.cfg.LoseResponses, lost: &w.lost,
		rng: rand.New(rand.NewPCG(uint64(w.cfg.Seed), 0x6c6f7374+uint64(id)))}
}

// newTransport is a client transport for the cluster.
func (w *Workload) newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 16
	if w.cfg.TLS != nil {
		t.TLSClientConfig = w.cfg.TLS.Clone()
	}
	return t
}

// LostResponses is the number of answers the lossy transport threw away.
func (w *Workload) LostResponses() int64 { return w.lost.Load() }

// Close closes the idle connections of the workload's clients.
func (w *Workload) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.transports {
		t.CloseIdleConnections()
	}
}

func (w *Workload) noteArtifact(name string) {
	w.mu.Lock()
	w.artifacts[name] = true
	w.mu.Unlock()
}

func (w *Workload) noteHandoff(task string) {
	w.mu.Lock()
	w.handoffs[task] = true
	w.mu.Unlock()
}
