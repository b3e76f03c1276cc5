package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// layoutFile, in BaseDir, records the node count and ports of the cluster
// whose data lives there. Raft remembers its peers by address, so a cluster
// restarted on other ports, or with another node count, would not find
// itself again: Start refuses that, and adopts the recorded ports for the
// nodes whose Config gives none.
const layoutFile = "cluster.json"

type layout struct {
	Nodes     int   `json:"nodes"`
	HTTPPorts []int `json:"http_ports"`
	RaftPorts []int `json:"raft_ports"`
}

func (l layout) String() string {
	return fmt.Sprintf("%d nodes, HTTP ports %s, Raft ports %s", l.Nodes, portList(l.HTTPPorts), portList(l.RaftPorts))
}

// portList shows ports as "7001-7003" when consecutive, else "7001,7005".
func portList(ports []int) string {
	consecutive := len(ports) > 1
	for i := 1; i < len(ports); i++ {
		consecutive = consecutive && ports[i] == ports[i-1]+1
	}
	if consecutive {
		return fmt.Sprintf("%d-%d", ports[0], ports[len(ports)-1])
	}
	parts := make([]string, len(ports))
	for i, p := range ports {
		parts[i] = strconv.Itoa(p)
	}
	return strings.Join(parts, ",")
}

// readLayout returns BaseDir's recorded layout, or nil when there is none.
func readLayout(baseDir string) (*layout, error) {
	b, err := os.ReadFile(filepath.Join(baseDir, layoutFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	var l layout
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", filepath.Join(baseDir, layoutFile), err)
	}
	if len(l.HTTPPorts) != l.Nodes || len(l.RaftPorts) != l.Nodes {
		return nil, fmt.Errorf("cluster: %s: %d nodes but %d HTTP and %d Raft ports",
			filepath.Join(baseDir, layoutFile), l.Nodes, len(l.HTTPPorts), len(l.RaftPorts))
	}
	return &l, nil
}

// writeLayout records l in baseDir, atomically.
func writeLayout(baseDir string, l layout) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(baseDir, layoutFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("cluster: record layout: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(baseDir, layoutFile)); err != nil {
		return fmt.Errorf("cluster: record layout: %w", err)
	}
	return nil
}

// hasData reports whether dir exists and is not empty.
func hasData(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) > 0
}

// adoptLayout checks the nodes against a recorded layout, taking the
// recorded port of every node that has none yet. Called with c.mu held.
func (c *Cluster) adoptLayout() error {
	l, err := readLayout(c.cfg.BaseDir)
	if err != nil || l == nil {
		return err
	}
	if !slices.ContainsFunc(c.nodes, func(n *node) bool { return hasData(n.dataDir) }) {
		return nil // the data is gone: the record no longer binds
	}
	mismatch := l.Nodes != len(c.nodes)
	for i := 0; !mismatch && i < l.Nodes; i++ {
		n := c.nodes[i]
		mismatch = (n.httpPort != 0 && n.httpPort != l.HTTPPorts[i]) || (n.raftPort != 0 && n.raftPort != l.RaftPorts[i])
	}
	if mismatch {
		return fmt.Errorf("%w: %s holds the data of a cluster of %s; asked for %s",
			ErrLayout, c.cfg.BaseDir, l, c.layout())
	}
	for i, n := range c.nodes {
		n.httpPort, n.raftPort = l.HTTPPorts[i], l.RaftPorts[i]
	}
	return nil
}

// layout describes the nodes' current ports (0 where not yet chosen).
// Called with c.mu held.
func (c *Cluster) layout() layout {
	l := layout{Nodes: len(c.nodes)}
	for _, n := range c.nodes {
		l.HTTPPorts = append(l.HTTPPorts, n.httpPort)
		l.RaftPorts = append(l.RaftPorts, n.raftPort)
	}
	return l
}
