package cluster

// A stand-in for batond, run by the test binary itself when
// CLUSTER_FAKE_BATOND=1, so the harness's process handling can be tested
// without the real server. It speaks just enough of the API: /healthz,
// /readyz and /v1/cluster, and "elects" as leader the lowest-numbered peer
// that answers on its Raft port (a paused or dead node does not).
//
// Behaviour switches, each naming one node id:
//   FAKE_EXIT=n2     n2 prints a fatal line and exits 3 at start
//   FAKE_DIVERGE=n2  n2 reports another state_digest
//   FAKE_LAG=n2      n2 reports a lower applied_index

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/baton-dev/baton/client"
)

const fakeEnv = "CLUSTER_FAKE_BATOND"

type fakeNode struct {
	id, dataDir, httpAddr, raftAddr, peers, join string
}

func runFakeBatond(args []string) int {
	var f fakeNode
	fs := flag.NewFlagSet("fake-batond", flag.ContinueOnError)
	fs.StringVar(&f.id, "id", "", "")
	fs.StringVar(&f.dataDir, "data-dir", "", "")
	fs.StringVar(&f.httpAddr, "http-addr", "", "")
	fs.StringVar(&f.raftAddr, "raft-addr", "", "")
	fs.StringVar(&f.peers, "peers", "", "")
	fs.StringVar(&f.join, "join", "", "")
	for _, name := range []string{"heartbeat-timeout", "election-timeout", "leader-lease-timeout", "commit-timeout", "log-level"} {
		fs.String(name, "", "")
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fmt.Printf("fake batond %s starting\n", f.id)
	if os.Getenv("FAKE_EXIT") == f.id {
		fmt.Fprintf(os.Stderr, "fatal: fake failure for %s\n", f.id)
		return 3
	}
	if err := f.recordStart(); err != nil {
		fmt.Fprintln(os.Stderr, "fatal:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := f.serve(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "fatal:", err)
		return 1
	}
	fmt.Println("fake batond stopped cleanly")
	return 0
}

// recordStart appends "peers" or "join" to data-dir/starts.
func (f *fakeNode) recordStart() error {
	mode := "peers"
	if f.join != "" {
		mode = "join"
	}
	file, err := os.OpenFile(filepath.Join(f.dataDir, "starts"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer file.Close()
	_, err = fmt.Fprintln(file, mode)
	return err
}

func (f *fakeNode) serve(ctx context.Context) error {
	raftL, err := net.Listen("tcp", f.raftAddr)
	if err != nil {
		return err
	}
	defer raftL.Close()
	go func() { // the liveness probe: a process that runs answers "ok"
		for {
			conn, err := raftL.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Write([]byte("ok\n"))
			conn.Close()
		}
	}()
	httpL, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: f.mux()}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(httpL) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (f *fakeNode) mux() *http.ServeMux {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) }
	mux.HandleFunc("GET /healthz", ok)
	mux.HandleFunc("GET /readyz", ok)
	mux.HandleFunc("GET /v1/cluster", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+os.Getenv("BATON_ADMIN_TOKEN") {
			http.Error(w, `{"error":{"code":"unauthenticated"}}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Query().Get("consistency") != "stale" {
			http.Error(w, "the harness must ask for stale status", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(f.status())
	})
	return mux
}

func (f *fakeNode) status() NodeStatus {
	st := NodeStatus{NodeID: f.id, State: StateFollower, Term: 1, CommitIndex: 5, AppliedIndex: 5, StateDigest: "sha256:same"}
	if os.Getenv("FAKE_DIVERGE") == f.id {
		st.StateDigest = "sha256:other"
	}
	if os.Getenv("FAKE_LAG") == f.id {
		st.AppliedIndex = 4
	}
	for _, peer := range strings.Split(f.peers, ",") {
		id, addr, _ := strings.Cut(peer, "=")
		if id != "" && probe(addr) {
			st.Leader = client.LeaderInfo{ID: id, RaftAddr: addr}
			break
		}
	}
	if st.Leader.ID == f.id {
		st.State = StateLeader
	}
	return st
}

// probe reports whether a fake node answers on its Raft address.
func probe(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && line == "ok\n"
}
