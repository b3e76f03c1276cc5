package cluster

import "errors"

// Errors returned by this package, to be checked with errors.Is.
var (
	// ErrClosed: the Cluster was closed.
	ErrClosed = errors.New("cluster: closed")
	// ErrNoSuchNode: a node index outside [0, Nodes).
	ErrNoSuchNode = errors.New("cluster: no such node")
	// ErrNotRunning: the operation needs a running node process.
	ErrNotRunning = errors.New("cluster: node not running")
	// ErrRunning: the operation needs the node's process to be stopped.
	ErrRunning = errors.New("cluster: node already running")
	// ErrExited: a node process exited while the harness waited for it to
	// come up. The error text carries the tail of its log.
	ErrExited = errors.New("cluster: node exited")
	// ErrPortInUse: a configured port could not be bound before start.
	ErrPortInUse = errors.New("cluster: port in use")
	// ErrLayout: BaseDir holds the data of a cluster with another node
	// count or other ports (see Start).
	ErrLayout = errors.New("cluster: layout mismatch")
	// ErrDiverged: two nodes reported the same applied_index with different
	// state_digest values, which the API forbids.
	ErrDiverged = errors.New("cluster: state diverged")
)

func isNotRunning(err error) bool { return errors.Is(err, ErrNotRunning) }
