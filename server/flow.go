package server

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

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

// retryAfterFlow sets Retry-After (whole seconds, at least 1) on a claim
// refused by a queue's claim rate, from the refusal's retry_after_ms.
func retryAfterFlow(w http.ResponseWriter, res *fsm.Result) {
	if res.Code != wire.CodeRateLimited || len(res.Details) == 0 {
		return
	}
	var d struct {
		RetryAfterMs int64 `json:"retry_after_ms"`
	}
	if json.Unmarshal(res.Details, &d) == nil && d.RetryAfterMs > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(max(1, (d.RetryAfterMs+999)/1000), 10))
	}
}
