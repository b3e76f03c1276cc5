package baton

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/result"
	"github.com/baton-dev/baton/client"
)

// RecoveryParams size the recovery workload.
type RecoveryParams struct {
	Clients  int
	Schedule loadgen.KillSchedule
}

// Recovery is the recovery workload: the cas load with Clients clients
// while the leader is killed with SIGKILL on a schedule and restarted, and
// a prober (loadgen.Recovery) writes its own task every 20 ms.
func Recovery(ctx context.Context, env *Env, p Params, rp RecoveryParams) (*result.Run, error) {
	// One task more than clients: the prober's.
	tasks, err := setupCAS(ctx, env, fmt.Sprintf("rec%d-", rp.Clients), rp.Clients+1)
	if err != nil {
		return nil, err
	}
	pt := tasks[rp.Clients]
	probe := func(ctx context.Context) error {
		_, err := pt.c.UpdateTask(ctx, Tenant, pt.id, client.UpdateTaskRequest{
			FencingToken: &pt.token, Result: json.RawMessage(`{"probe":true}`)})
		return err
	}
	cfg := p.loadConfig(rp.Clients)
	r, err := loadgen.Recovery(ctx, cfg, rp.Schedule, clusterKiller{env}, casOp(tasks), probe)
	if err != nil {
		return nil, err
	}
	r.System, r.Workload, r.Variant = result.SystemBaton, result.WorkloadRecovery, fmt.Sprintf("C=%d", rp.Clients)
	return r, nil
}

// clusterKiller kills and restarts batond processes.
type clusterKiller struct{ env *Env }

func (k clusterKiller) KillLeader(ctx context.Context) (string, time.Time, error) {
	c := k.env.Cluster
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	leader, err := c.WaitLeader(wctx)
	if err != nil {
		return "", time.Time{}, err
	}
	at := time.Now()
	if err := c.Kill(leader); err != nil {
		return "", time.Time{}, err
	}
	return c.ID(leader), at, nil
}

func (k clusterKiller) Restart(ctx context.Context, node string) error {
	i, err := strconv.Atoi(strings.TrimPrefix(node, "n"))
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return k.env.Cluster.Restart(rctx, i-1)
}
