package metricsink

import (
	"strings"
	"unicode"
)

// A go-metrics key becomes a Prometheus metric by Prometheus' conventions:
// snake_case (raft's camelCase parts split at their capitals), base units
// in the name (go-metrics timers are in ms: they are observed in seconds,
// under _seconds), _total on counters, and a HELP that says what the
// figure is. known holds what the key alone cannot tell: the samples and
// gauges that are not times, and the help text of every metric that
// hashicorp/raft 1.7 and the node package emit. A key not listed is named
// by the same rules (a sample is taken to be a time in ms, as every
// go-metrics timer is) with a help that names its key.

// unit is what a sample or gauge measures.
type unit uint8

const (
	unitMillis unit = iota // a time in ms: shown in seconds
	unitCount              // a number of things
	unitRatio              // a fraction, 0 to 1
)

type spec struct {
	name string // the Prometheus name without the prefix and the suffix; "" derives it from the key
	unit unit
	help string
}

// known is keyed by the go-metrics key joined with ".".
var known = map[string]spec{
	// Elections and leadership.
	"raft.state.candidate":                 {help: "Times this node became a candidate (started an election)."},
	"raft.state.follower":                  {help: "Times this node became a follower."},
	"raft.state.leader":                    {help: "Times this node became the leader; its rate across the cluster is the rate of leader changes."},
	"raft.transition.heartbeat_timeout":    {help: "Times this follower heard from no leader within the heartbeat timeout and started an election."},
	"raft.transition.leader_lease_timeout": {help: "Times this leader stepped down for lack of contact with a quorum within the leader lease."},
	"raft.candidate.electSelf":             {help: "Time a candidate took to send its vote requests."},
	"raft.candidate.preElectSelf":          {help: "Time a candidate took to send its pre-vote requests."},
	"raft.leader.lastContact":              {help: "Time since the leader last heard from each follower, sampled as it checks its lease."},
	"raft.verify_leader":                   {help: "Leadership checks (a quorum asked) for linearizable reads and barriers."},
	"raft.peers":                           {unit: unitCount, help: "Voters and non-voters in the latest configuration this node knows."},

	// The write path on the leader.
	"raft.apply":                         {help: "Log entries proposed on this node as leader."},
	"raft.barrier":                       {help: "Barriers proposed on this node as leader."},
	"raft.leader.dispatchLog":            {help: "Time the leader took to write a batch of entries to its own log."},
	"raft.leader.dispatchNumLogs":        {unit: unitCount, help: "Entries in the leader's last batch written to its log."},
	"raft.commitTime":                    {help: "Time from the leader's log write to the entry's commit (replication to a quorum)."},
	"raft.commitNumLogs":                 {unit: unitCount, help: "Entries committed by the leader's last commit."},
	"raft.leader.oldestLogAge":           {help: "Age of the oldest entry in the log: how far back a lagging follower can catch up without a snapshot."},
	"raft.replication.appendEntries.rpc": {help: "Time of an AppendEntries call to a follower, by peer_id."},
	"raft.replication.appendEntries.logs": {name: "raft_replication_append_entries_entries",
		help: "Log entries sent to a follower in AppendEntries calls, by peer_id."},
	"raft.replication.heartbeat":       {help: "Time of a heartbeat to a follower, by peer_id."},
	"raft.replication.installSnapshot": {help: "Time to send a snapshot to a follower that was too far behind, by peer_id."},

	// The state machine.
	"raft.fsm.apply":         {help: "Time the state machine took to apply one entry."},
	"raft.fsm.applyBatch":    {help: "Time the state machine took to apply a batch of entries."},
	"raft.fsm.applyBatchNum": {name: "raft_fsm_apply_batch_entries", unit: unitCount, help: "Entries in each batch handed to the state machine."},
	"raft.fsm.enqueue":       {help: "Time committed entries waited to be handed to the state machine."},
	"raft.fsm.restore":       {help: "Time the state machine took to restore a snapshot."},
	"raft.fsm.snapshot":      {help: "Time the state machine took to capture a snapshot."},
	"raft.fsm.store_config":  {help: "Time to record a configuration entry with the state machine."},
	"raft.thread.main.saturation": {name: "raft_thread_main_saturation_ratio", unit: unitRatio,
		help: "Share of time raft's main goroutine was busy, sampled each second (near 1: raft is the bottleneck)."},
	"raft.thread.fsm.saturation": {name: "raft_thread_fsm_saturation_ratio", unit: unitRatio,
		help: "Share of time raft's state-machine goroutine was busy, sampled each second (near 1: applying is the bottleneck)."},

	// Followers and the network.
	"raft.rpc.appendEntries":             {help: "Time this follower took to handle an AppendEntries call."},
	"raft.rpc.appendEntries.storeLogs":   {help: "Time this follower took to write the entries of an AppendEntries call to its log."},
	"raft.rpc.appendEntries.processLogs": {help: "Time this follower took to process the entries of an AppendEntries call."},
	"raft.rpc.processHeartbeat":          {help: "Time this follower took to handle a heartbeat."},
	"raft.rpc.requestVote":               {help: "Time this node took to handle a vote request."},
	"raft.rpc.installSnapshot":           {help: "Time this follower took to receive and install a snapshot from the leader."},
	"raft.net.getRPCType":                {help: "Time to read the type of an incoming Raft RPC."},
	"raft.net.rpcDecode":                 {help: "Time to decode an incoming Raft RPC, by rpcType."},
	"raft.net.rpcEnqueue":                {help: "Time an incoming Raft RPC waited to be handed to raft, by rpcType."},
	"raft.net.rpcRespond":                {help: "Time raft took to answer an incoming Raft RPC, by rpcType."},

	// Snapshots and the log.
	"raft.snapshot.create":       {help: "Time to open a new snapshot in the snapshot store."},
	"raft.snapshot.persist":      {help: "Time to write a snapshot to the snapshot store."},
	"raft.snapshot.takeSnapshot": {help: "Time a snapshot took end to end (capture, persist, log compaction)."},
	"raft.compactLogs":           {help: "Time to delete log entries a snapshot covers."},
	"raft.removeOldLogs":         {help: "Time to delete old log entries after a snapshot was installed."},
	"raft.restore":               {help: "Snapshots restored by this node."},
	"raft.restoreUserSnapshot":   {help: "Time to restore a snapshot given by an operator."},

	// The node package (server/core/node): where a write's time goes.
	"node.apply":        {help: "Time of a whole proposal on the leader: waiting for a group-commit slot, Raft, the state machine."},
	"node.propose_wait": {help: "Time a proposal waited for a group-commit slot on the leader."},
	"node.raft_apply":   {help: "Time of a group commit in Raft on the leader: log write, replication, commit and the state machine."},
}

// describe is the Prometheus name (with prefix and suffix), help and unit
// of a go-metrics key of kind k.
func describe(prefix string, k kind, key []string) (name, help string, u unit) {
	dotted := strings.Join(key, ".")
	sp, ok := known[dotted]
	if !ok && k == kindGauge {
		sp.unit = unitCount // only a sample is a timer's
	}
	base := sp.name
	if base == "" {
		parts := make([]string, len(key))
		for i, p := range key {
			parts[i] = snake(p)
		}
		base = strings.Join(parts, "_")
	}
	u = sp.unit
	switch {
	case k == kindCounter:
		base += "_total"
	case u == unitMillis:
		base += "_seconds"
	}
	name = sanitize(base)
	if prefix != "" {
		name = prefix + "_" + name
	}
	help = sp.help
	if !ok {
		help = "The go-metrics key " + dotted + " (not described here: see hashicorp/raft's documentation)."
	}
	return name, help, u
}

// snake turns camelCase into snake_case: appendEntries is append_entries,
// getRPCType get_rpc_type; a part already in snake_case is unchanged.
func snake(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if unicode.IsUpper(c) {
			prevLower := i > 0 && (unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]))
			nextLower := i > 0 && i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1])
			if prevLower || nextLower {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}
