package pgbench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/result"
	"github.com/jackc/pgx/v5"
)

// Params are the timings and seed of one workload run.
type Params struct {
	Warmup   time.Duration
	Duration time.Duration
	Seed     uint64
}

// schema is a task table shaped like Baton's tasks, with the partial index
// a SKIP LOCKED queue needs and a sequence for fencing tokens.
const schema = `
CREATE TABLE tasks (
	id            text PRIMARY KEY,
	queue         text NOT NULL,
	status        text NOT NULL DEFAULT 'pending',
	owner         text NOT NULL DEFAULT '',
	lease_until   timestamptz,
	fencing_token bigint NOT NULL DEFAULT 0,
	version       bigint NOT NULL DEFAULT 1,
	attempt       integer NOT NULL DEFAULT 0,
	priority      bigint NOT NULL DEFAULT 0,
	payload       jsonb NOT NULL DEFAULT '{}',
	result        jsonb,
	seq           bigserial,
	created_at    timestamptz NOT NULL DEFAULT now(),
	updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tasks_claimable ON tasks (queue, priority DESC, seq) WHERE status = 'pending';
CREATE SEQUENCE fencing_tokens;
`

// claimSQL takes the best pending task of a queue, skipping rows other
// transactions hold, and leases it with a new fencing token.
const claimSQL = `
UPDATE tasks SET status = 'running', owner = $2, lease_until = now() + make_interval(secs => $3),
	fencing_token = nextval('fencing_tokens'), attempt = attempt + 1, version = version + 1, updated_at = now()
WHERE id = (
	SELECT id FROM tasks WHERE queue = $1 AND status = 'pending'
	ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id, fencing_token`

// doneSQL is the fenced update to done, releasing the lease.
const doneSQL = `
UPDATE tasks SET status = 'done', owner = '', lease_until = NULL, version = version + 1, updated_at = now()
WHERE id = $1 AND fencing_token = $2`

var errFenced = errors.New("fenced: the task's fencing token changed")

// Queue is the queue workload: workers connections, each looping a claim
// (one statement, its own transaction) and a fenced update to done.
func Queue(ctx context.Context, s *Server, p Params, workers, preload int) (*result.Run, error) {
	queue := fmt.Sprintf("q%d", workers)
	loadTime, err := setup(ctx, s, queue, preload)
	if err != nil {
		return nil, err
	}
	conns := make([]*pgx.Conn, workers)
	for i := range conns {
		c, err := s.Connect(ctx)
		if err != nil {
			closeConns(conns[:i])
			return nil, err
		}
		conns[i] = c
	}
	defer closeConns(conns)
	op := func(ctx context.Context, w *loadgen.Worker) error {
		c := conns[w.ID]
		t0 := time.Now()
		var id string
		var token int64
		err := c.QueryRow(ctx, claimSQL, queue, "worker-"+strconv.Itoa(w.ID), 3600).Scan(&id, &token)
		if errors.Is(err, pgx.ErrNoRows) {
			return loadgen.ErrDrained
		}
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		t1 := time.Now()
		w.Observe("claim", t1.Sub(t0))
		tag, err := c.Exec(ctx, doneSQL, id, token)
		if err != nil {
			return fmt.Errorf("done: %w", err)
		}
		if tag.RowsAffected() != 1 {
			return errFenced
		}
		w.Observe("update", time.Since(t1))
		return nil
	}
	out := loadgen.Run(ctx, loadgen.Config{Workers: workers, Warmup: p.Warmup, Duration: p.Duration, Seed: p.Seed}, op)
	r := out.Run
	r.System, r.Workload, r.Variant = result.SystemPostgres, result.WorkloadQueue, fmt.Sprintf("W=%d", workers)
	r.SetMetric("tasks_per_s", r.OpsPerSec)
	r.SetMetric("preload_tasks", float64(preload))
	r.SetMetric("preload_s", loadTime.Seconds())
	r.Notef("PostgreSQL is one server: a commit is one local WAL flush (synchronous_commit = on), not a majority of three")
	return r, nil
}

// setup creates the schema and preloads n pending tasks.
func setup(ctx context.Context, s *Server, queue string, n int) (time.Duration, error) {
	start := time.Now()
	c, err := s.Connect(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, schema); err != nil {
		return 0, fmt.Errorf("schema: %w", err)
	}
	if _, err := c.Exec(ctx, `INSERT INTO tasks (id, queue) SELECT $1 || '-' || g, $1 FROM generate_series(0, $2 - 1) g`,
		queue, n); err != nil {
		return 0, fmt.Errorf("preload: %w", err)
	}
	if _, err := c.Exec(ctx, `ANALYZE tasks`); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func closeConns(cs []*pgx.Conn) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c.Close(ctx)
		})
	}
	wg.Wait()
}
