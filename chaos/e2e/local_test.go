package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freeRun finds a base port with n consecutive free loopback ports, for
// http and for raft.
func freeRun(t *testing.T, n int) (httpBase, raftBase int) {
	t.Helper()
	for range 200 {
		base := 20000 + rand.IntN(40000)
		var lns []net.Listener
		ok := true
		for p := base; p < base+2*n && ok; p++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			ln.Close()
		}
		if ok {
			return base, base + n
		}
	}
	t.Fatal("no run of free ports")
	return 0, 0
}

// runLocal starts `batond local` with args and returns its export lines
// (name to value) once it printed them; t.Cleanup stops it with SIGTERM.
func runLocal(t *testing.T, args ...string) (map[string]string, string) {
	t.Helper()
	if batondErr != nil {
		t.Fatalf("batond did not build: %v", batondErr)
	}
	httpBase, raftBase := freeRun(t, 3)
	args = append([]string{"local", "--dir", filepath.Join(t.TempDir(), "local"), "--log-level", "warn",
		fmt.Sprintf("--base-http-port=%d", httpBase), fmt.Sprintf("--base-raft-port=%d", raftBase)}, args...)
	cmd := exec.Command(batond, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var printed strings.Builder
	exports := map[string]string{}
	lines := make(chan string)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		go func() {
			for range lines {
			}
		}()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.After(90 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("batond local exited:\n%s\nstderr:\n%s", printed.String(), stderr.String())
			}
			printed.WriteString(line + "\n")
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "export "); ok {
				k, v, _ := strings.Cut(rest, "=")
				exports[k] = v
			}
			if strings.Contains(line, "bin/baton status") {
				return exports, printed.String()
			}
		case <-deadline:
			t.Fatalf("batond local did not print its exports in time:\n%s\nstderr:\n%s", printed.String(), stderr.String())
		}
	}
}

// baton runs the CLI with exactly env as its BATON_* environment.
func baton(t *testing.T, bin string, env map[string]string, args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BATON_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := cliRun{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLocalTLS: `batond local` (what make run runs) starts a cluster with
// TLS everywhere and prints https endpoints and BATON_CACERT; the CLI
// works with those exports and refuses the nodes' certificates without
// the CA. `batond local --insecure` is the plain-HTTP cluster of before.
func TestLocalTLS(t *testing.T) {
	bin := buildBatonCLI(t)
	t.Run("tls", func(t *testing.T) {
		env, printed := runLocal(t)
		if !strings.HasPrefix(env["BATON_ENDPOINTS"], "https://127.0.0.1:") || env["BATON_CACERT"] == "" || env["BATON_TOKEN"] == "" {
			t.Fatalf("got exports %v, want https endpoints, a token and BATON_CACERT; printed:\n%s", env, printed)
		}
		if _, err := os.Stat(env["BATON_CACERT"]); err != nil {
			t.Fatalf("BATON_CACERT: %v", err)
		}
		if r := baton(t, bin, env, "status"); r.code != 0 || !strings.Contains(r.stdout, "(Leader)") {
			t.Fatalf("baton status with the exports: %v", r)
		}
		if r := baton(t, bin, env, "tenant", "create", "acme"); r.code != 0 {
			t.Fatalf("baton tenant create: %v", r)
		}
		noCA := map[string]string{"BATON_ENDPOINTS": env["BATON_ENDPOINTS"], "BATON_TOKEN": env["BATON_TOKEN"]}
		if r := baton(t, bin, noCA, "status"); r.code == 0 || !strings.Contains(r.stderr, "certificate") {
			t.Fatalf("baton status without BATON_CACERT: %v\nwant a certificate error", r)
		}
	})
	t.Run("insecure", func(t *testing.T) {
		env, printed := runLocal(t, "--insecure")
		if !strings.HasPrefix(env["BATON_ENDPOINTS"], "http://127.0.0.1:") || env["BATON_CACERT"] != "" {
			t.Fatalf("got exports %v, want http endpoints and no BATON_CACERT; printed:\n%s", env, printed)
		}
		if r := baton(t, bin, env, "status"); r.code != 0 || !strings.Contains(r.stdout, "(Leader)") {
			t.Fatalf("baton status: %v", r)
		}
	})
}
