package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/server/core/node"
	"github.com/baton-dev/baton/server/core/tlsconf"
)

// envOf is a fake environment for parseFlags.
type envOf map[string]string

func (e envOf) lookup(k string) (string, bool) { v, ok := e[k]; return v, ok }
func (e envOf) environ() []string {
	var out []string
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

func parseWith(args []string, env envOf) (*options, error) {
	return parseFlags(args, env.lookup, env.environ(), io.Discard)
}

var required = []string{"--id", "n1", "--data-dir", "/nonexistent/data"}

func TestEnvSetsEveryFlag(t *testing.T) {
	env := envOf{
		"BATON_ID": "n2", "BATON_DATA_DIR": "/d", "BATON_HTTP_ADDR": "0.0.0.0:7002",
		"BATON_RAFT_ADDR": "0.0.0.0:8002", "BATON_ADVERTISE_HTTP_ADDR": "n2:7002",
		"BATON_ADVERTISE_RAFT_ADDR": "n2:8002", "BATON_PEERS": "n1=n1:8001,n2=n2:8002",
		"BATON_HEARTBEAT_TIMEOUT": "500ms", "BATON_ELECTION_TIMEOUT": "700ms",
		"BATON_MAX_WATCHES_PER_PRINCIPAL": "7", "BATON_FAILPOINTS": "true",
		"BATON_LOG_LEVEL": "debug", "BATON_LOG_FORMAT": "json",
	}
	o, err := parseWith(nil, env)
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.nodeConfig()
	switch {
	case o.id != "n2" || o.dataDir != "/d" || o.httpAddr != "0.0.0.0:7002" || o.raftAddr != "0.0.0.0:8002":
		t.Errorf("id/data-dir/addrs: %q %q %q %q", o.id, o.dataDir, o.httpAddr, o.raftAddr)
	case cfg.HTTPAddr != "n2:7002" || cfg.RaftAdvertise != "n2:8002" || cfg.RaftAddr != "0.0.0.0:8002":
		t.Errorf("node config addresses: http %q raft %q advertise %q", cfg.HTTPAddr, cfg.RaftAddr, cfg.RaftAdvertise)
	case len(cfg.Peers) != 2 || cfg.Peers[1].Address != "n2:8002":
		t.Errorf("peers: %v", cfg.Peers)
	case cfg.HeartbeatTimeout != 500*time.Millisecond || cfg.ElectionTimeout != 700*time.Millisecond:
		t.Errorf("timeouts: %v %v", cfg.HeartbeatTimeout, cfg.ElectionTimeout)
	case o.logFormat != "json":
		t.Errorf("log format %q, want json", o.logFormat)
	case o.maxWatches != 7 || !o.failpoints || o.level.String() != "DEBUG":
		t.Errorf("max watches %d, failpoints %v, level %v", o.maxWatches, o.failpoints, o.level)
	case o.advertisedRaft() != "n2:8002":
		t.Errorf("advertised raft (for --join): %q", o.advertisedRaft())
	}
	if len(o.unknownEnv) != 0 {
		t.Errorf("unknown env reported: %v", o.unknownEnv)
	}

}

// TestEveryFlagHasAVariable sets each flag through its variable alone.
func TestEveryFlagHasAVariable(t *testing.T) {
	fs := newFlagSet(&options{raft: node.DefaultConfig()}, io.Discard)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		var v string
		switch f.Value.(flag.Getter).Get().(type) {
		case bool:
			v = "true"
		case time.Duration:
			v = "1234ms"
		case int, int64, uint64:
			v = "1234"
		case string:
			v = "x:1234"
		default:
			t.Fatalf("--%s: a flag of type %T", f.Name, f.Value)
		}
		name := envName(f.Name)
		if _, err := setFromEnv(fs, envOf{name: v}.lookup, nil); err != nil {
			t.Fatal(err)
		}
		if got := f.Value.String(); got != v && got != "1.234s" {
			t.Errorf("%s=%s: --%s is %q", name, v, f.Name, got)
		}
	})
	if n < 40 {
		t.Fatalf("only %d flags", n)
	}
}

func TestFlagsWinOverEnv(t *testing.T) {
	env := envOf{"BATON_ID": "from-env", "BATON_DATA_DIR": "/env", "BATON_LOG_LEVEL": "warn", "BATON_HTTP_ADDR": "127.0.0.1:9"}
	o, err := parseWith([]string{"--id", "n1", "--log-level", "error"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if o.id != "n1" || o.logLevel != "error" || o.dataDir != "/env" || o.httpAddr != "127.0.0.1:9" {
		t.Errorf("id %q level %q data %q http %q: want n1, error (flags) and /env, 127.0.0.1:9 (env)", o.id, o.logLevel, o.dataDir, o.httpAddr)
	}
	// An empty variable counts as unset: the default stays.
	o, err = parseWith(required, envOf{"BATON_HTTP_ADDR": ""})
	if err != nil || o.httpAddr != "127.0.0.1:7001" {
		t.Errorf("empty BATON_HTTP_ADDR: %v, %q", err, o.httpAddr)
	}
}

func TestUnknownEnvReported(t *testing.T) {
	o, err := parseWith(required, envOf{"BATON_HTTP_ADRR": "x", "BATON_TOKEN": "t", "BATON_ADMIN_TOKEN": "a", "HOME": "/"})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.unknownEnv) != 1 || o.unknownEnv[0] != "BATON_HTTP_ADRR" {
		t.Errorf("unknown: %v, want [BATON_HTTP_ADRR]", o.unknownEnv)
	}
}

func TestAdvertiseAddresses(t *testing.T) {
	o, err := parseWith(required, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := o.nodeConfig(); c.HTTPAddr != "127.0.0.1:7001" || c.RaftAdvertise != "" || o.advertisedRaft() != "127.0.0.1:8001" {
		t.Errorf("defaults: advertise http %q raft %q (%q)", c.HTTPAddr, c.RaftAdvertise, o.advertisedRaft())
	}
	o, err = parseWith(append([]string{"--http-addr", ":7001", "--advertise-http-addr", "10.0.0.5:17001",
		"--raft-addr", "[::]:8001", "--advertise-raft-addr", "baton-0.baton:8001"}, required...), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := o.nodeConfig(); c.HTTPAddr != "10.0.0.5:17001" || c.RaftAdvertise != "baton-0.baton:8001" || c.RaftAddr != "[::]:8001" {
		t.Errorf("advertised: http %q raft %q listen %q", c.HTTPAddr, c.RaftAdvertise, c.RaftAddr)
	}
}

func TestInvalidConfigNamesTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  envOf
		want string
	}{
		{[]string{"--raft-addr", "0.0.0.0:8001"}, nil, "--advertise-raft-addr"},
		{[]string{"--http-addr", ":7001"}, nil, "--advertise-http-addr"},
		{nil, envOf{"BATON_HTTP_ADDR": "0.0.0.0:7001"}, "--advertise-http-addr"},
		{[]string{"--raft-addr", "0.0.0.0:8001", "--advertise-raft-addr", "0.0.0.0:8001"}, nil, "--advertise-raft-addr"},
		{[]string{"--advertise-raft-addr", "n1"}, nil, "--advertise-raft-addr"},
		{[]string{"--advertise-http-addr", "n1:0"}, nil, "--advertise-http-addr"},
		{[]string{"--http-addr", "localhost"}, nil, "--http-addr"},
		{[]string{"--peers", "n2=n2:8001"}, nil, "--peers"},
		{[]string{"--peers", "n1"}, nil, "--peers"},
		{[]string{"--join", "n1:7001"}, nil, "--join"},
		{[]string{"--log-level", "loud"}, nil, "--log-level"},
		{[]string{"--log-format", "xml"}, nil, "--log-format"},
		{[]string{"--raft-log", "sqlite"}, nil, "--raft-log"},
		{[]string{"--leader-lease-timeout", "1s"}, nil, "--leader-lease-timeout"},
		{[]string{"--commit-timeout", "0s"}, nil, "--commit-timeout"},
		{[]string{"--watch-history-bytes", "10"}, nil, "--watch-history-bytes"},
		{[]string{"--max-inflight-entries", "0"}, nil, "--max-inflight-entries"},
		{[]string{"--chunk-compression", "gzip"}, nil, "--chunk-compression"},
		{[]string{"--pprof-addr", "6060"}, nil, "--pprof-addr"},
		{[]string{"--tls-cert-file", "c.pem"}, nil, "--tls-key-file"},
		{nil, envOf{"BATON_HEARTBEAT_TIMEOUT": "soon"}, "BATON_HEARTBEAT_TIMEOUT (--heartbeat-timeout)"},
		{nil, envOf{"BATON_FAILPOINTS": "maybe"}, "BATON_FAILPOINTS (--failpoints)"},
	} {
		_, err := parseWith(append(append([]string{}, required...), c.args...), c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: got %v, want an error naming %s", c.args, c.env, err, c.want)
		}
	}
}

// TestInvalidConfigBeforeIO: run refuses a bad configuration with exit 2
// before it reads the token, opens the data dir or listens.
func TestInvalidConfigBeforeIO(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"--id", "n1", "--data-dir", dir, "--raft-addr", "0.0.0.0:0",
		"--admin-token-file", "/nonexistent/token"}, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--advertise-raft-addr") {
		t.Errorf("exit %d, %q", code, stderr.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the data dir was created: %v", err)
	}
}

func TestHealthcheck(t *testing.T) {
	dir := t.TempDir()
	if _, err := tlsconf.Generate(dir, nil, []string{"n1"}, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	f := tlsconf.NodeFiles(dir, "n1")
	peer, err := tlsconf.LoadPeer(f.Cert, f.Key, f.CA)
	if err != nil {
		t.Fatal(err)
	}
	status := http.StatusServiceUnavailable
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{peer.Cert}} // the API: no client certificate asked
	srv.StartTLS()
	defer srv.Close()
	port := srv.Listener.Addr().String()[strings.LastIndex(srv.Listener.Addr().String(), ":")+1:]

	// The node's own environment, as in the image: https on its port,
	// verified for its advertised name with the peer CA.
	env := envOf{"BATON_HTTP_ADDR": "0.0.0.0:" + port, "BATON_TLS_CERT_FILE": f.Cert,
		"BATON_PEER_CA_FILE": f.CA, "BATON_ADVERTISE_HTTP_ADDR": "n1:7001"}
	hc := func(args []string, env envOf) (int, string) {
		var out, errb bytes.Buffer
		code := runHealthcheck(context.Background(), args, env.lookup, &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, out := hc(nil, env); code != 1 || !strings.Contains(out, "503") {
		t.Errorf("not ready: exit %d, %q", code, out)
	}
	status = http.StatusOK
	if code, out := hc(nil, env); code != 0 {
		t.Errorf("ready: exit %d, %q", code, out)
	}
	if code, out := hc([]string{"--url", srv.URL + "/readyz", "--cacert", f.CA}, envOf{}); code != 0 {
		t.Errorf("--url --cacert: exit %d, %q", code, out)
	}
	// Without the CA the certificate is not trusted; a name the
	// certificate does not carry is refused.
	if code, out := hc([]string{"--url", srv.URL + "/readyz"}, envOf{}); code != 1 || !strings.Contains(out, "certificate") {
		t.Errorf("no CA: exit %d, %q", code, out)
	}
	if code, out := hc([]string{"--server-name", "n2"}, env); code != 1 || !strings.Contains(out, "certificate") {
		t.Errorf("wrong name: exit %d, %q", code, out)
	}
	if code, out := hc([]string{"--url", "127.0.0.1:7001"}, envOf{}); code != 2 {
		t.Errorf("bad --url: exit %d, %q", code, out)
	}
}

func TestCertsIfAbsentAndCAKeyOut(t *testing.T) {
	dir, keyDir := filepath.Join(t.TempDir(), "tls"), filepath.Join(t.TempDir(), "ca")
	args := []string{"--out", dir, "--ca-key-out", keyDir, "--nodes", "n1,n2", "--if-absent"}
	var out, errb bytes.Buffer
	if code := runCerts(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "ca-key.pem")); !os.IsNotExist(err) {
		t.Errorf("ca-key.pem is in --out: %v", err)
	}
	if _, err := tlsconf.LoadCA(filepath.Join(dir, "ca.pem"), filepath.Join(keyDir, "ca-key.pem")); err != nil {
		t.Errorf("the CA key in --ca-key-out: %v", err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "n1.pem"))
	out.Reset()
	if code := runCerts(args, &out, &errb); code != 0 || !strings.Contains(out.String(), "nothing written") {
		t.Errorf("second run with --if-absent: exit %d, %q %q", code, out.String(), errb.String())
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "n1.pem")); !bytes.Equal(before, after) {
		t.Error("n1.pem changed")
	}
	// Some files there, others not: refused, nothing mixed.
	errb.Reset()
	if code := runCerts([]string{"--out", dir, "--ca-key-out", keyDir, "--nodes", "n1,n3", "--if-absent"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "lacks 2") {
		t.Errorf("partial: exit %d, %q", code, errb.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "n3.pem")); !os.IsNotExist(err) {
		t.Errorf("n3.pem was written: %v", err)
	}
}

func TestLogFormatJSON(t *testing.T) {
	var buf bytes.Buffer
	log, closeLog, err := newLogger(slog.LevelInfo, "json", "", &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog()
	log.Info("hello", "node", "n1")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil || rec["msg"] != "hello" || rec["node"] != "n1" {
		t.Fatalf("json log line %q: %v %v", buf.String(), rec, err)
	}
}

// TestSessionTenantBytesFlag: --session-tenant-bytes defaults to a
// quarter of --session-bytes, and is refused below 256 KiB or above
// --session-bytes.
func TestSessionTenantBytesFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int64 // 0: refused
	}{
		{nil, 16 << 20},
		{[]string{"--session-bytes", "8388608"}, 2 << 20},
		{[]string{"--session-tenant-bytes", "1048576"}, 1 << 20},
		{[]string{"--session-tenant-bytes", "1024"}, 0},
		{[]string{"--session-bytes", "1048576", "--session-tenant-bytes", "2097152"}, 0},
	} {
		o, err := parseWith(append(append([]string{}, required...), tc.args...), envOf{})
		switch {
		case tc.want == 0 && err == nil:
			t.Errorf("%v: got %d, want refused", tc.args, o.limits.SessionTenantBytes)
		case tc.want != 0 && (err != nil || o.limits.SessionTenantBytes != tc.want):
			t.Errorf("%v: got %v (err %v), want %d", tc.args, o, err, tc.want)
		}
	}
}

// TestRestoreRefusesBadCompression: batond restore checks its
// --chunk-compression before it reads the backup or writes the data dir.
func TestRestoreRefusesBadCompression(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var out, errb bytes.Buffer
	code := runRestore([]string{"--from", "/nonexistent.backup", "--data-dir", dir, "--id", "n1",
		"--peers", "n1=127.0.0.1:8001", "--chunk-compression", "lz4"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "--chunk-compression") {
		t.Fatalf("got exit %d, stderr %q; want 2 naming --chunk-compression", code, errb.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the data dir was created (%v)", err)
	}
}

// TestOperationsDocNamesEveryFlag: docs/operations.md is where an
// operator looks a flag up; every flag of the node is named there
// (`--pprof-addr` and `--failpoints` were not).
func TestOperationsDocNamesEveryFlag(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	fs := newFlagSet(&options{raft: node.DefaultConfig()}, io.Discard)
	fs.VisitAll(func(f *flag.Flag) {
		if !bytes.Contains(doc, []byte("`--"+f.Name)) {
			t.Errorf("--%s is not in docs/operations.md", f.Name)
		}
	})
}
