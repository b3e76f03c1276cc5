package checker

import (
	"fmt"
	"strings"

	"github.com/baton-dev/baton/chaos/history"
)

// Converged checks the nodes' final states: every node answered, and all
// report the same applied_index and the same state_digest.
func Converged(nodes []history.NodeState) []Anomaly {
	if len(nodes) == 0 {
		return []Anomaly{{Checker: NameConvergence, Message: "no node state was recorded"}}
	}
	var out []Anomaly
	for _, n := range nodes {
		if n.Err != "" {
			out = append(out, Anomaly{Checker: NameConvergence, Key: n.ID, Message: "no final state: " + n.Err})
		}
	}
	if len(out) > 0 {
		return out
	}
	ref := nodes[0]
	for _, n := range nodes[1:] {
		if n.AppliedIndex != ref.AppliedIndex || n.StateDigest != ref.StateDigest {
			return []Anomaly{{Checker: NameConvergence, Message: "nodes differ: " + describeNodes(nodes)}}
		}
	}
	return nil
}

func describeNodes(nodes []history.NodeState) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprintf("%s applied=%d digest=%s", n.ID, n.AppliedIndex, n.StateDigest)
	}
	return strings.Join(parts, "; ")
}
