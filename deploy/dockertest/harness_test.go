// Package dockertest runs deploy/compose.yaml on the real Docker engine:
// the image that `make image` builds, three (then five) TLS nodes, and the
// faults an operator meets (a killed leader, a partitioned leader, a
// rolling restart). It talks to the nodes only through their API ports,
// published on 127.0.0.1, and through `docker exec` of the CLI in the
// image. `make test-deploy` runs it (BATON_DEPLOY_TESTS=1); without that
// variable every test skips.
package dockertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

// stack is one compose project of the deploy files.
type stack struct {
	t       *testing.T
	project string
	dir     string   // deploy/
	files   []string // compose files, for every command but the first up
	env     []string
	token   string
	caFile  string
	ports   map[string]int // node -> host port of its API on 127.0.0.1
	admin   *client.Client // every node, admin token
	compose []string       // docker-compose, or docker compose
	ids     map[string]string
	network string
	started time.Time
}

var allNodes = []string{"n1", "n2", "n3", "n4", "n5"}

// stackSeq numbers the projects of this process: a test may run two
// (backup in one, restore into a fresh one) within the same second.
var stackSeq atomic.Int64

func requireDocker(t *testing.T) {
	t.Helper()
	if os.Getenv("BATON_DEPLOY_TESTS") != "1" {
		t.Skip("the deploy tests run on the Docker engine: make test-deploy (BATON_DEPLOY_TESTS=1)")
	}
	if err := osexec.Command("docker", "info").Run(); err != nil {
		t.Fatalf("BATON_DEPLOY_TESTS=1 but docker info failed: %v", err)
	}
}

// image is the image under test: BATON_IMAGE, built by make test-deploy;
// without it, `make image` builds baton:dev.
func image(t *testing.T) string {
	t.Helper()
	if img := os.Getenv("BATON_IMAGE"); img != "" {
		return img
	}
	cmd := osexec.Command("make", "-C", repoRoot(t), "image")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	return "baton:dev"
}

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	root, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func composeCommand() []string {
	if _, err := osexec.LookPath("docker-compose"); err == nil {
		return []string{"docker-compose"}
	}
	return []string{"docker", "compose"}
}

// freePorts picks n free ports on 127.0.0.1, below the kernel's ephemeral
// range so that no outgoing connection takes one while its container is
// killed and restarted (see cluster.FreePorts).
func freePorts(t *testing.T, n int) []int {
	ports, err := cluster.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// newStack prepares a uniquely named project (its token file, ports and
// environment) and registers its removal (containers, networks and
// volumes), whatever the test's outcome.
func newStack(t *testing.T) *stack {
	t.Helper()
	img := image(t)
	tmp := t.TempDir()
	secrets := filepath.Join(tmp, "secrets")
	if err := os.Mkdir(secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	token := client.NewIdempotencyKey() + client.NewIdempotencyKey()
	tokenFile := filepath.Join(secrets, "admin-token")
	// 0644 inside a 0700 directory: readable by the containers' user
	// (65532), through the bind mount, and by nobody else on this host.
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &stack{
		t: t, dir: filepath.Join(repoRoot(t), "deploy"), token: token,
		project: fmt.Sprintf("batondeploy%d%04d%d", time.Now().Unix()%100000, os.Getpid()%10000, stackSeq.Add(1)),
		files:   []string{"compose.yaml", "compose.five.yaml"},
		ports:   map[string]int{}, compose: composeCommand(), ids: map[string]string{},
		caFile: filepath.Join(tmp, "ca.pem"), started: time.Now(),
	}
	s.network = s.project + "_default"
	s.env = append(os.Environ(), "BATON_IMAGE="+img, "BATON_TOKEN_FILE="+tokenFile)
	for i, p := range freePorts(t, len(allNodes)) {
		n := allNodes[i]
		s.ports[n] = p
		s.env = append(s.env, fmt.Sprintf("BATON_%s_PORT=%d", strings.ToUpper(n), p))
	}
	t.Cleanup(s.down)
	return s
}

func (s *stack) down() {
	if s.t.Failed() {
		out, _ := s.composeOut(s.files, "logs", "--no-color", "--tail", "40")
		s.t.Logf("logs of %s:\n%s", s.project, out)
	}
	// Every volume any of the project's containers mounts, anonymous ones
	// included, must be gone after down.
	var vols []string
	if ids, _ := osexec.Command("docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+s.project).Output(); len(ids) > 0 {
		args := append([]string{"inspect", "--format", "{{range .Mounts}}{{if .Name}}{{.Name}} {{end}}{{end}}"}, strings.Fields(string(ids))...)
		out, _ := osexec.Command("docker", args...).Output()
		vols = strings.Fields(string(out))
	}
	if out, err := s.composeOut(s.files, "down", "--volumes", "--remove-orphans", "--timeout", "2"); err != nil {
		s.t.Errorf("compose down %s: %v\n%s", s.project, err, out)
	}
	// Belt and braces: nothing of the project may outlive the test.
	for _, kind := range []string{"container", "volume", "network"} {
		args := []string{kind, "ls", "-q", "--filter", "label=com.docker.compose.project=" + s.project}
		if kind == "container" {
			args = []string{"ps", "-aq", "--filter", "label=com.docker.compose.project=" + s.project}
		}
		out, _ := osexec.Command("docker", args...).Output()
		if left := strings.Fields(string(out)); len(left) > 0 {
			s.t.Errorf("%s left after down: %v", kind, left)
			rm := append([]string{kind, "rm", "-f"}, left...)
			if kind == "container" {
				rm = append([]string{"rm", "-f", "-v"}, left...)
			}
			_ = osexec.Command("docker", rm...).Run()
		}
	}
	for _, v := range vols {
		if osexec.Command("docker", "volume", "inspect", v).Run() == nil {
			s.t.Errorf("volume %s left after down", v)
			run("docker", "volume", "rm", "-f", v)
		}
	}
	s.t.Logf("project %s: %s from start to teardown", s.project, time.Since(s.started).Round(time.Second))
}

func (s *stack) composeOut(files []string, args ...string) (string, error) {
	full := append([]string{}, s.compose[1:]...)
	full = append(full, "-p", s.project)
	for _, f := range files {
		full = append(full, "-f", f)
	}
	full = append(full, args...)
	cmd := osexec.Command(s.compose[0], full...)
	cmd.Dir, cmd.Env = s.dir, s.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (s *stack) composeRun(files []string, args ...string) string {
	s.t.Helper()
	out, err := s.composeOut(files, args...)
	if err != nil {
		s.t.Fatalf("compose %v: %v\n%s", args, err, out)
	}
	return out
}

// up starts the project's nodes (the three of compose.yaml, or all five)
// and waits for each to be ready.
func (s *stack) up(nodes []string) {
	s.t.Helper()
	files := s.files[:1]
	if len(nodes) > 3 {
		files = s.files
	}
	s.composeRun(files, "up", "-d")
	if s.admin == nil {
		// The CA the certs service made, for this test's client.
		s.docker("cp", s.id("n1")+":/tls/ca.pem", s.caFile)
		var eps []string
		for _, n := range allNodes[:3] {
			eps = append(eps, s.url(n))
		}
		s.admin = s.client(eps...)
	}
	for _, n := range nodes {
		s.waitReady(n, 90*time.Second)
	}
}

func (s *stack) url(n string) string { return fmt.Sprintf("https://127.0.0.1:%d", s.ports[n]) }

// client is an admin client of the given endpoints, over TLS with the
// cluster's CA.
func (s *stack) client(endpoints ...string) *client.Client {
	s.t.Helper()
	c, err := client.New(client.Config{Endpoints: endpoints, Token: s.token, CAFile: s.caFile,
		Timeout: 2 * time.Second, MaxRetry: 20 * time.Second, NoSession: true})
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// id is the container id of a node.
func (s *stack) id(n string) string {
	s.t.Helper()
	if id := s.ids[n]; id != "" {
		return id
	}
	out := strings.TrimSpace(s.composeRun(s.files, "ps", "-q", n))
	if out == "" {
		s.t.Fatalf("no container for %s", n)
	}
	s.ids[n] = strings.Fields(out)[0]
	return s.ids[n]
}

func (s *stack) docker(args ...string) string {
	s.t.Helper()
	out, err := osexec.Command("docker", args...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("docker %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// cli runs the baton CLI inside node n's container, with the admin token;
// the container's environment points it at every node over TLS.
func (s *stack) cli(n string, args ...string) (string, error) {
	full := append([]string{"exec", "-e", "BATON_TOKEN=" + s.token, s.id(n), "baton"}, args...)
	var out bytes.Buffer
	cmd := osexec.Command("docker", full...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (s *stack) mustCLI(n string, args ...string) string {
	s.t.Helper()
	out, err := s.cli(n, args...)
	if err != nil {
		s.t.Fatalf("baton %v in %s: %v\n%s", args, n, err, out)
	}
	return out
}

// view is a node's own view of the cluster (a stale read of GET
// /v1/cluster from that node alone).
func (s *stack) view(ctx context.Context, n string) (*client.ClusterStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return s.admin.ClusterAt(ctx, s.url(n))
}

func (s *stack) waitReady(n string, within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := s.view(ctx, n)
		cancel()
		if err == nil && st.Leader.ID != "" && st.AppliedIndex > 0 && st.AppliedIndex >= st.CommitIndex {
			return
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Fatalf("%s not ready within %v: %v", n, within, last)
}

// leader polls the given nodes until one of them says it leads, and all
// that answer agree on who.
func (s *stack) leader(nodes []string, within time.Duration) string {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var lead string
		for _, n := range nodes {
			st, err := s.view(context.Background(), n)
			if err == nil && st.State == "Leader" {
				lead = n
			}
		}
		if lead != "" {
			return lead
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("no leader among %v within %v", nodes, within)
	return ""
}

// converge waits until every node reports the same applied index and the
// same state digest, and returns that digest.
func (s *stack) converge(nodes []string, within time.Duration) string {
	s.t.Helper()
	deadline := time.Now().Add(within)
	var views []string
	for time.Now().Before(deadline) {
		views = views[:0]
		digests := map[string]bool{}
		var idx uint64
		same := true
		for _, n := range nodes {
			st, err := s.view(context.Background(), n)
			if err != nil {
				views = append(views, fmt.Sprintf("%s: %v", n, err))
				same = false
				continue
			}
			views = append(views, fmt.Sprintf("%s: applied %d digest %.19s", n, st.AppliedIndex, st.StateDigest))
			if idx == 0 {
				idx = st.AppliedIndex
			}
			same = same && st.AppliedIndex == idx && st.StateDigest != ""
			digests[st.StateDigest] = true
		}
		if same && len(digests) == 1 {
			for d := range digests {
				return d
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	sort.Strings(views)
	s.t.Fatalf("nodes %v did not converge within %v:\n%s", nodes, within, strings.Join(views, "\n"))
	return ""
}

// exec runs a command, ignoring its outcome (cleanup paths).
func run(name string, args ...string) { _ = osexec.Command(name, args...).Run() }
