// Package netns runs a chaos cluster's members in network namespaces of
// their own and injects faults in the network between them: partitions,
// one-way loss, delay and a flapping link, made with ip, iptables and tc
// rather than with the failpoints inside batond.
//
// # Topology
//
// Setup makes, for a cluster of n members, n+1 namespaces named
// "bnet<pid>-<k>-...": one per member ("-n1", "-n2", ...) and one for the
// network ("-net"), which holds a bridge, br0, and the address the
// clients speak from. Each member's eth0 is one end of a veth pair whose
// other end ("vn1", ...) is a port of br0. Addresses are 10.213.7.1 to .n
// for the members and 10.213.7.254 for the clients, in a range that exists
// only inside these namespaces: nothing is added to the namespace the
// process started in, and no traffic leaves the namespaces made here.
//
// Names: each member resolves the others by their ids (n1, n2, ...)
// through a hosts file of its own, and the clients' namespace does not,
// as a Docker host does not resolve the service names of a compose
// project: a member may advertise "n1:7001". Every namespace gets a
// resolv.conf that names only its own loopback, so a lookup never leaves
// it. (ip netns exec mounts /etc/netns/<namespace>/* over /etc/*.)
//
// The clients (the workload, the checkers' reads, the harness's polls) run
// in the network namespace: a program re-executes itself there with
// Command, and the re-executed process finds its topology with FromEnv.
// Members are started with Launch ("ip netns exec <member> batond ...").
//
// # Faults
//
// Cuts and loss are iptables DROP rules in the sending member's OUTPUT
// chain (a cut is a loss of every packet); a partition cuts both
// directions of every pair across it. Delay is tc netem on the member's
// eth0 where the kernel has it; otherwise (this project's machines) an
// iptables rule hands the member's outgoing packets to an NFQUEUE that
// this package holds each one in for the delay (delay_linux.go), and,
// where no queue can be bound, a token bucket (tbf): a slow link. A flapping link
// takes the member's bridge port down and up. The clients' address is
// never cut, so an agent sees a partitioned member as a real client would
// see a member cut from its peers; a flapping or delayed link does affect
// them, as it would.
//
// # Cleanup
//
// Close kills every process left in the namespaces and deletes them, which
// deletes the veths and the bridge with them. Sweep deletes the namespaces
// of processes that are gone (a test killed before Close), found by the
// name prefix and the pid in the name.
package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Prefix starts the name of every namespace this package makes.
const Prefix = "bnet"

// Addresses: members are Subnet+"1" to Subnet+"n"; the clients ClientHost.
const (
	Subnet     = "10.213.7."
	ClientHost = Subnet + "254"
	// MaxNodes is the largest cluster Setup builds.
	MaxNodes = 9
)

// EnvVar carries a topology to a process re-executed in it (Command).
const EnvVar = "BATON_NETNS"

// Net is one topology. Its fault methods may be called from several
// goroutines.
type Net struct {
	id    string // "bnet<pid>-<k>"
	nodes int
	ip    string // path of ip
	netem bool   // the kernel has sch_netem

	mu      sync.Mutex
	flaps   map[int]*flap
	delays  map[int]*delayer // NFQUEUE delays in force
	delayed int64            // packets that closed delays let go
}

type flap struct {
	stop chan struct{}
	done chan struct{}
}

var seq struct {
	sync.Mutex
	n int
}

// Nodes is the number of members.
func (n *Net) Nodes() int { return n.nodes }

// NS is the network namespace: the bridge and the clients.
func (n *Net) NS() string { return n.id + "-net" }

// Member is member i's namespace.
func (n *Net) Member(i int) string { return n.id + "-n" + strconv.Itoa(i+1) }

// Host is member i's address.
func (n *Net) Host(i int) string { return Subnet + strconv.Itoa(i+1) }

// Hosts are the members' addresses, in order.
func (n *Net) Hosts() []string {
	out := make([]string, n.nodes)
	for i := range out {
		out[i] = n.Host(i)
	}
	return out
}

// Netem reports whether delays are made with netem (else with tbf).
func (n *Net) Netem() bool { return n.netem }

// port is member i's port on the bridge, in the network namespace.
func port(i int) string { return "vn" + strconv.Itoa(i+1) }

// Check reports why namespaces cannot be made here, or nil: it needs root,
// ip, iptables and tc, and makes and deletes a namespace.
func Check() error {
	if os.Geteuid() != 0 {
		return errors.New("netns: not root")
	}
	for _, tool := range []string{"ip", "iptables", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("netns: %s not found (apt-get install iproute2 iptables)", tool)
		}
	}
	name := fmt.Sprintf("%s%d-probe", Prefix, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Errorf("netns: ip netns add: %v: %s", err, bytes.TrimSpace(out))
	}
	defer func() { _ = exec.Command("ip", "netns", "del", name).Run() }()
	if out, err := exec.Command("ip", "netns", "exec", name, "iptables", "-w", "-S").CombinedOutput(); err != nil {
		return fmt.Errorf("netns: iptables in a namespace: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// EnsureTools installs iproute2 and iptables from Debian's packages when
// ip, tc or iptables is missing and this process is root with apt-get;
// it does nothing when all are there.
func EnsureTools(ctx context.Context, logf func(string, ...any)) error {
	var pkgs []string
	if !have("ip") || !have("tc") {
		pkgs = append(pkgs, "iproute2")
	}
	if !have("iptables") {
		pkgs = append(pkgs, "iptables")
	}
	if len(pkgs) == 0 {
		return nil
	}
	if os.Geteuid() != 0 || !have("apt-get") {
		return fmt.Errorf("netns: %v missing, and no apt-get as root to install them", pkgs)
	}
	logf("netns: installing %v (apt-get)", pkgs)
	for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq", "--no-install-recommends"}, pkgs...)} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("netns: apt-get %s: %v: %s", args[0], err, tail(out))
		}
	}
	return nil
}

func have(tool string) bool {
	_, err := exec.LookPath(tool)
	return err == nil
}

// Setup builds the topology of n members. On failure it removes whatever
// it made.
func Setup(ctx context.Context, n int) (*Net, error) {
	if n < 1 || n > MaxNodes {
		return nil, fmt.Errorf("netns: %d members, want 1 to %d", n, MaxNodes)
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	seq.Lock()
	seq.n++
	k := seq.n
	seq.Unlock()
	net := &Net{id: fmt.Sprintf("%s%d-%d", Prefix, os.Getpid(), k), nodes: n, ip: ip, flaps: map[int]*flap{}, delays: map[int]*delayer{}}
	if err := net.build(ctx); err != nil {
		net.Close()
		return nil, err
	}
	net.netem = net.probeNetem(ctx)
	return net, nil
}

func (n *Net) build(ctx context.Context) error {
	br := n.NS()
	steps := [][]string{
		{"netns", "add", br},
		{"-n", br, "link", "set", "lo", "up"},
		{"-n", br, "link", "add", "br0", "type", "bridge"},
		{"-n", br, "addr", "add", ClientHost + "/24", "dev", "br0"},
		{"-n", br, "link", "set", "br0", "up"},
	}
	for i := range n.nodes {
		m := n.Member(i)
		steps = append(steps,
			[]string{"netns", "add", m},
			[]string{"-n", m, "link", "set", "lo", "up"},
			[]string{"-n", br, "link", "add", port(i), "type", "veth", "peer", "name", "eth0", "netns", m},
			[]string{"-n", br, "link", "set", port(i), "master", "br0", "up"},
			[]string{"-n", m, "addr", "add", n.Host(i) + "/24", "dev", "eth0"},
			[]string{"-n", m, "link", "set", "eth0", "up"},
		)
	}
	for _, s := range steps {
		if err := n.run(ctx, n.ip, s...); err != nil {
			return err
		}
	}
	return n.writeEtc()
}

// etcDir is where ip netns exec finds the files it mounts over /etc for
// namespace name.
func etcDir(name string) string { return "/etc/netns/" + name }

// writeEtc writes every namespace's resolv.conf and the members' hosts.
func (n *Net) writeEtc() error {
	resolv := []byte("# chaos/netns: lookups stay in this namespace\nnameserver 127.0.0.1\n")
	hosts := "127.0.0.1 localhost\n"
	for i := range n.nodes {
		hosts += n.Host(i) + " n" + strconv.Itoa(i+1) + "\n"
	}
	files := map[string]map[string][]byte{n.NS(): {"resolv.conf": resolv}}
	for i := range n.nodes {
		files[n.Member(i)] = map[string][]byte{"resolv.conf": resolv, "hosts": []byte(hosts)}
	}
	for name, fs := range files {
		if err := os.MkdirAll(etcDir(name), 0o755); err != nil {
			return fmt.Errorf("netns: %w", err)
		}
		for f, b := range fs {
			if err := os.WriteFile(etcDir(name)+"/"+f, b, 0o644); err != nil {
				return fmt.Errorf("netns: %w", err)
			}
		}
	}
	return nil
}

// probeNetem reports whether a netem qdisc can be added to member 0's eth0.
func (n *Net) probeNetem(ctx context.Context) bool {
	if n.inMember(ctx, 0, "tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "1ms") != nil {
		return false
	}
	_ = n.inMember(ctx, 0, "tc", "qdisc", "del", "dev", "eth0", "root")
	return true
}

// run runs one command, bounded by 30 s, and returns its output in the
// error when it fails.
func (n *Net) run(ctx context.Context, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: %s %s: %v: %s", name, strings.Join(args, " "), err, tail(out))
	}
	return nil
}

// inMember runs a command in member i's namespace.
func (n *Net) inMember(ctx context.Context, i int, args ...string) error {
	return n.run(ctx, n.ip, append([]string{"netns", "exec", n.Member(i)}, args...)...)
}

// Launch is a cluster.Config.Launch: it runs binary in member i's
// namespace (ip netns exec execs it, so the pid is the node's).
func (n *Net) Launch(i int, binary string, args []string) (string, []string) {
	return n.ip, append([]string{"netns", "exec", n.Member(i), binary}, args...)
}

// Command runs name in the network namespace, where the members are
// reachable, with the topology in the environment for FromEnv. The child
// is killed if this process dies.
func (n *Net) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, n.ip, append([]string{"netns", "exec", n.NS(), name}, args...)...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%t", EnvVar, n.id, n.nodes, n.netem))
	cmd.SysProcAttr = childAttr()
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// FromEnv returns the topology this process was started in by Command, or
// nil when it was not. The returned Net does not own the namespaces: its
// Close only heals the faults.
func FromEnv() (*Net, error) {
	v := os.Getenv(EnvVar)
	if v == "" {
		return nil, nil
	}
	f := strings.Split(v, ",")
	if len(f) != 3 || !strings.HasPrefix(f[0], Prefix) {
		return nil, fmt.Errorf("netns: %s=%q: want id,nodes,netem", EnvVar, v)
	}
	nodes, err := strconv.Atoi(f[1])
	if err != nil || nodes < 1 || nodes > MaxNodes {
		return nil, fmt.Errorf("netns: %s=%q: bad member count", EnvVar, v)
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	return &Net{id: f[0], nodes: nodes, ip: ip, netem: f[2] == "true", flaps: map[int]*flap{}, delays: map[int]*delayer{}}, nil
}

// Close heals every fault, kills the processes left in the namespaces and
// deletes the namespaces (with their links). It returns the first error
// and tries every step.
func (n *Net) Close() error {
	_ = n.Heal(context.Background())
	var errs []error
	names := []string{n.NS()}
	for i := range n.nodes {
		names = append(names, n.Member(i))
	}
	for _, name := range names {
		if err := remove(name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// remove kills the processes in namespace name and deletes it, with its
// files in /etc/netns.
func remove(name string) error {
	if err := os.RemoveAll(etcDir(name)); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	if _, err := os.Stat("/var/run/netns/" + name); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	killIn(name)
	if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
		return fmt.Errorf("netns: ip netns del %s: %v: %s", name, err, tail(out))
	}
	return nil
}

// killIn SIGKILLs the processes in namespace name (members this package's
// user started there) and waits up to 5 s for them to go.
func killIn(name string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := exec.Command("ip", "netns", "pids", name).Output()
		pids := strings.Fields(string(out))
		if err != nil || len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Sweep deletes the namespaces left by processes that are gone (named
// Prefix<pid>-...), with whatever still runs in them, and returns their
// names.
func Sweep() ([]string, error) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("netns: ip netns list: %w", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	if entries, err := os.ReadDir("/etc/netns"); err == nil {
		for _, e := range entries {
			if _, err := os.Stat("/var/run/netns/" + e.Name()); errors.Is(err, os.ErrNotExist) {
				names = append(names, e.Name()) // files whose namespace is gone
			}
		}
	}
	var swept []string
	var errs []error
	for _, name := range names {
		if !strings.HasPrefix(name, Prefix) {
			continue
		}
		digits := strings.TrimPrefix(name, Prefix)
		if k := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); k >= 0 {
			digits = digits[:k]
		}
		pid, err := strconv.Atoi(digits)
		if err != nil || pid == os.Getpid() || alive(pid) {
			continue
		}
		if err := remove(name); err != nil {
			errs = append(errs, err)
			continue
		}
		swept = append(swept, name)
	}
	return swept, errors.Join(errs...)
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = "..." + s[len(s)-300:]
	}
	return s
}
