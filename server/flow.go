package server

import "github.com/baton-dev/baton/fsm/wire"

// Flow control per queue (docs/api.md "Flow control"): the bounds of a
// policy's limits. The state machine enforces them on every claim.
const (
	maxFlowLeased = 1_000_000
	maxFlowRate   = 100_000
)

func validFlow(req *wire.QueuePolicy) error {
	for _, f := range []struct {
		name string
		v    int64
		max  int64
	}{{"max_leased", req.MaxLeased, maxFlowLeased}, {"claims_per_second", req.ClaimsPerSecond, maxFlowRate},
		{"claim_burst", req.ClaimBurst, maxFlowRate}, {"concurrency_key_limit", req.ConcurrencyKeyLimit, maxFlowLeased}} {
		if f.v < 0 || f.v > f.max {
			return badRequest("%s must be between 0 (no limit) and %d, not %d", f.name, f.max, f.v)
		}
	}
	if req.ClaimBurst != 0 && req.ClaimsPerSecond == 0 {
		return badRequest("claim_burst goes with claims_per_second")
	}
	return nil
}
