// Command batond is the Baton server: one member of a Raft cluster serving
// the HTTP API of docs/api.md. `batond local` runs a local cluster of them.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/baton-dev/baton/cmd/internal/buildinfo"
	"github.com/baton-dev/baton/cmd/internal/gctune"
	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server"
	"github.com/baton-dev/baton/server/core/chunkplane"
	"github.com/baton-dev/baton/server/core/chunkstore"
	"github.com/baton-dev/baton/server/core/metricsink"
	"github.com/baton-dev/baton/server/core/node"
	"github.com/baton-dev/baton/server/core/tlsconf"
	metrics "github.com/hashicorp/go-metrics/compat"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "local" {
		os.Exit(runLocal(ctx, args[1:], os.Stdout, os.Stderr))
	}
	if len(args) > 0 && args[0] == "certs" {
		os.Exit(runCerts(args[1:], os.Stdout, os.Stderr))
	}
	if len(args) > 0 && args[0] == "restore" {
		os.Exit(runRestore(args[1:], os.Stdout, os.Stderr))
	}
	if len(args) > 0 && args[0] == "recover" {
		os.Exit(runRecover(args[1:], os.Stdout, os.Stderr))
	}
	if len(args) > 0 && args[0] == "healthcheck" {
		os.Exit(runHealthcheck(ctx, args[1:], os.LookupEnv, os.Stdout, os.Stderr))
	}
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		fmt.Println("batond " + buildinfo.Get().String())
		os.Exit(0)
	}
	os.Exit(run(ctx, args, os.Stderr))
}

const usageText = `batond: the Baton server, one member of a Raft cluster.

Usage:
  batond --id n1 --data-dir DIR --http-addr 127.0.0.1:7001 --raft-addr 127.0.0.1:8001 \
         --peers n1=127.0.0.1:8001,n2=127.0.0.1:8002,n3=127.0.0.1:8003
  batond --id n4 --data-dir DIR --http-addr ... --raft-addr ... --join http://127.0.0.1:7001
  batond local --nodes 3        a local three-node cluster, TLS everywhere (what 'make run' runs)
  batond certs --out DIR --nodes n1,n2,n3 --hosts 10.0.0.1,...
                                a CA and node certificates for --tls-* and --peer-*
  batond restore --from FILE --data-dir DIR --id n1 --peers ...
                                seed a member of a new cluster from a backup
  batond recover --data-dir DIR --id n1 --peers n1=...
                                after losing quorum for good: rewrite a survivor's configuration
  batond healthcheck [--url https://127.0.0.1:7001/readyz --cacert ca.pem]
                                exit 0 if the node answers 200 (a container's HEALTHCHECK)

A node whose data dir is empty bootstraps from --peers (or joins with --join);
a node with data resumes and ignores both. The admin token comes from
--admin-token-file or BATON_ADMIN_TOKEN. SIGTERM shuts down cleanly.

Every flag can also be set in the environment as BATON_<FLAG>, upper case
with dashes as underscores (--data-dir: BATON_DATA_DIR); a flag on the
command line wins, and an empty variable counts as unset.

A node that listens on a wildcard address (0.0.0.0:7001, :8001) must say
how its peers reach it: --advertise-http-addr and --advertise-raft-addr
(a DNS name is announced as written, and peers verify it against the
node's certificate).

TLS: --tls-cert-file/--tls-key-file serve the API over https (with
--client-ca-file, clients must present a certificate that CA signed);
--peer-cert-file/--peer-key-file/--peer-ca-file make Raft and every
node-to-node HTTP call mutual TLS under the cluster CA, without the admin
token. Without them the node starts, and warns.

Flags:
`

type options struct {
	id, dataDir, httpAddr, raftAddr, peers, join string
	advertiseHTTP, advertiseRaft                 string
	adminTokenFile, logLevel, logFile            string
	logFormat                                    string
	level                                        slog.Level
	peerList                                     []raft.Server
	unknownEnv                                   []string // BATON_* variables that name no flag
	raft                                         node.Config
	idemTTL                                      time.Duration
	sessionTTL                                   time.Duration
	limits                                       fsm.Limits
	maxWatches                                   int
	storeScanMax                                 int
	mcp                                          server.MCPConfig
	consoleDisabled                              bool
	failpoints                                   bool
	watchHistoryBytes                            int64
	pprofAddr                                    string
	gcHeadroom                                   int64
	chunkGCGrace                                 time.Duration
	chunkCompression                             string
	maxCheckpointBytes                           int64
	maxBlobReadBytes                             int64
	chunkCopyBacklog                             int64
	tls                                          tlsFlags
	http                                         httpLimits
}

// tlsFlags are the certificate files: the API's, and the peers' (mutual
// TLS between members, for Raft and node-to-node HTTP).
type tlsFlags struct {
	certFile, keyFile, clientCAFile       string
	peerCertFile, peerKeyFile, peerCAFile string
}

// httpLimits bound what one client can hold of the HTTP server.
type httpLimits struct {
	readHeaderTimeout, bodyTimeout, idleTimeout time.Duration
	maxConnections, maxHeaderBytes              int
}

// envPrefix starts the environment variable of every flag: BATON_DATA_DIR
// is --data-dir.
const envPrefix = "BATON_"

// envName is the environment variable that sets flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// notFlags are BATON_* variables that are not batond flags but are known:
// the admin token itself and the CLI's settings, often set in the same
// environment. Any other BATON_* variable naming no flag is reported as a
// likely typo.
var notFlags = map[string]bool{"BATON_ADMIN_TOKEN": true, "BATON_ENDPOINTS": true, "BATON_TOKEN": true,
	"BATON_CACERT": true, "BATON_CERT": true, "BATON_KEY": true, "BATON_TENANT": true}

// setFromEnv sets every flag of fs whose BATON_* variable is set and not
// empty, before the command line is parsed (so flags win). It returns the
// BATON_* variables of environ that name no flag and are not notFlags.
func setFromEnv(fs *flag.FlagSet, lookup func(string) (string, bool), environ []string) ([]string, error) {
	var err error
	known := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		known[name] = true
		v, ok := lookup(name)
		if !ok || v == "" || err != nil {
			return
		}
		if e := f.Value.Set(v); e != nil {
			err = fmt.Errorf("%s (--%s) %q: %v", name, f.Name, v, e)
		}
	})
	var unknown []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, envPrefix) && !known[k] && !notFlags[k] && !strings.HasPrefix(k, "BATON_TEST") {
			unknown = append(unknown, k)
		}
	}
	return unknown, err
}

// parseFlags reads the configuration from the environment (lookup,
// environ) and the command line, and checks all of it: nothing in it is
// used to open a file or a socket before it has been validated.
func parseFlags(args []string, lookup func(string) (string, bool), environ []string, stderr io.Writer) (*options, error) {
	o := &options{raft: node.DefaultConfig()}
	fs := newFlagSet(o, stderr)
	unknown, err := setFromEnv(fs, lookup, environ)
	if err != nil {
		return nil, err
	}
	o.unknownEnv = unknown
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// newFlagSet defines batond's flags into o.
func newFlagSet(o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("batond", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usageText); fs.PrintDefaults() }
	fs.StringVar(&o.id, "id", "", "this node's id (required), e.g. n1")
	fs.StringVar(&o.dataDir, "data-dir", "", "directory for the Raft log, snapshots and chunks (required)")
	fs.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:7001", "HTTP API listen address; also published to peers unless --advertise-http-addr is given")
	fs.StringVar(&o.raftAddr, "raft-addr", "127.0.0.1:8001", "Raft listen address; also advertised to peers unless --advertise-raft-addr is given")
	fs.StringVar(&o.advertiseHTTP, "advertise-http-addr", "", "host:port peers reach this node's HTTP API at (required when --http-addr is a wildcard such as 0.0.0.0:7001)")
	fs.StringVar(&o.advertiseRaft, "advertise-raft-addr", "", "host:port peers dial for Raft (required when --raft-addr is a wildcard such as 0.0.0.0:8001); announced as written, not resolved")
	fs.StringVar(&o.peers, "peers", "", "initial voters ID=HOST:PORT,...; bootstraps when the data dir is empty")
	fs.StringVar(&o.join, "join", "", "URL of a running node to join through, instead of --peers")
	fs.StringVar(&o.adminTokenFile, "admin-token-file", "", "file holding the admin token (or BATON_ADMIN_TOKEN)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "text (key=value) or json (one object a line, log/slog)")
	fs.StringVar(&o.logFile, "log-file", "", "write logs here instead of stderr")
	fs.DurationVar(&o.raft.HeartbeatTimeout, "heartbeat-timeout", o.raft.HeartbeatTimeout, "Raft heartbeat timeout")
	fs.DurationVar(&o.raft.ElectionTimeout, "election-timeout", o.raft.ElectionTimeout, "Raft election timeout")
	fs.DurationVar(&o.raft.LeaderLeaseTimeout, "leader-lease-timeout", o.raft.LeaderLeaseTimeout, "Raft leader lease timeout")
	fs.DurationVar(&o.raft.CommitTimeout, "commit-timeout", o.raft.CommitTimeout, "Raft commit timeout")
	fs.Uint64Var(&o.raft.SnapshotThreshold, "snapshot-threshold", o.raft.SnapshotThreshold, "log entries between snapshots")
	fs.DurationVar(&o.raft.SnapshotInterval, "snapshot-interval", o.raft.SnapshotInterval, "how often to check whether to snapshot")
	fs.Uint64Var(&o.raft.TrailingLogs, "trailing-logs", o.raft.TrailingLogs, "log entries kept after a snapshot")
	fs.IntVar(&o.raft.MaxAppendEntries, "max-append-entries", o.raft.MaxAppendEntries, "Raft MaxAppendEntries")
	fs.StringVar(&o.raft.LogStore, "raft-log", "", "Raft log format for a new data dir: wal (default) or boltdb; an existing dir keeps its own")
	fs.IntVar(&o.raft.MaxInflightEntries, "max-inflight-entries", o.raft.MaxInflightEntries, "group commit: log entries with Raft at once; more proposals share each")
	fs.BoolVar(&o.raft.RaftPipeline, "raft-pipeline", o.raft.RaftPipeline, "pipelined Raft replication (raft v1.7.3's pipeline can stall a follower for good: off by default, see docs/operations.md)")
	fs.DurationVar(&o.idemTTL, "idempotency-ttl", 24*time.Hour, "how long Idempotency-Key answers are remembered")
	fs.DurationVar(&o.sessionTTL, "session-ttl", time.Duration(fsm.DefaultSessionTTL)*time.Millisecond, "a client session unused this long expires (its retries then get idempotency_expired); the leader's value is the cluster's")
	fs.Int64Var(&o.limits.SessionBytes, "session-bytes", fsm.DefaultSessionBytes, "bytes all client sessions may keep for retries; past it the least recently used are dropped; the leader's value is the cluster's")
	fs.Int64Var(&o.limits.SessionTenantBytes, "session-tenant-bytes", 0, "bytes one tenant's client sessions may keep; past it the tenant's least recently used are dropped, not another tenant's; 0: a quarter of --session-bytes; the leader's value is the cluster's")
	fs.Int64Var(&o.limits.SessionsPerTenant, "sessions-per-tenant", fsm.DefaultSessionsPerTenant, "live client sessions per tenant; opening one more drops the tenant's least recently used; the leader's value is the cluster's")
	fs.Int64Var(&o.limits.IdemBytes, "idempotency-bytes", fsm.DefaultIdemBytes, "bytes of Idempotency-Key answers kept in all; past it the oldest are dropped; the leader's value is the cluster's")
	fs.Int64Var(&o.limits.IdemTenantBytes, "idempotency-tenant-bytes", fsm.DefaultIdemTenantBytes, "bytes of Idempotency-Key answers kept per tenant; past it the tenant's oldest are dropped; the leader's value is the cluster's")
	fs.Int64Var(&o.limits.MaxStateBytes, "max-state-bytes", defaultMaxStateBytes(), "bytes of data the state may hold (as etcd's --quota-backend-bytes); past it writes that grow the state get 507 resource_exhausted; 0: no limit; default a quarter of this machine's memory; the leader's value is the cluster's")
	fs.IntVar(&o.maxWatches, "max-watches-per-principal", 64, "watches one principal may hold open on this node (0: no cap); more get 429 rate_limited")
	fs.IntVar(&o.storeScanMax, "store-scan-max", 10_000, "items or namespaces one knowledge-store search or namespace listing examines at most (a search past it answers truncated)")
	fs.IntVar(&o.mcp.MaxSessions, "mcp-max-sessions", 256, "MCP sessions (/mcp) this node holds at once; one more is 503")
	fs.DurationVar(&o.mcp.IdleTimeout, "mcp-idle-timeout", 10*time.Minute, "an MCP session that sent nothing for this long ends, and its claim is released")
	fs.BoolVar(&o.mcp.Disabled, "mcp-disable", false, "do not serve /mcp")
	fs.BoolVar(&o.consoleDisabled, "console-disable", false, "do not serve the web console at /ui/")
	fs.Int64Var(&o.maxCheckpointBytes, "max-checkpoint-bytes", 16<<20, "largest checkpoint data held in chunks, in bytes (read whole to check it is JSON); more get 413 too_large")
	fs.Int64Var(&o.maxBlobReadBytes, "max-blob-read-bytes", 256<<20, "bytes of checkpoint values held in chunks that the node reads into answers of GETs and lists at once; one more is 503 unavailable")
	fs.Int64Var(&o.chunkCopyBacklog, "chunk-copy-backlog-bytes", chunkplane.DefaultMaxCopyBacklog, "bytes of chunk bodies held by copies to peers still running after their upload was answered (to a slow peer); past it such copies stop and repair brings the peer the body later")
	fs.DurationVar(&o.chunkGCGrace, "chunk-gc-grace", time.Hour, "how long a chunk no artifact references is kept")
	fs.StringVar(&o.chunkCompression, "chunk-compression", string(chunkstore.CompressionNone), "how this node stores chunk bodies it receives uncompressed (uploads, peers' copies, repair fetches): none, or zstd (less disk for compressible content, for several times the upload's CPU); chunks in either form are always read")
	fs.Int64Var(&o.watchHistoryBytes, "watch-history-bytes", fsm.DefaultWatchHistoryBytes, "bytes of recent events kept in memory for watchers; a watcher further behind gets 410 compacted")
	fs.Int64Var(&o.gcHeadroom, "gc-headroom", 64<<20, "bytes the Go heap may grow past its live data between collections (GOGC set from it, at least 25); 0, or GOGC in the environment, leaves Go's default")
	fs.StringVar(&o.pprofAddr, "pprof-addr", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060); off by default")
	fs.StringVar(&o.tls.certFile, "tls-cert-file", "", "serve the HTTP API over TLS with this certificate (PEM)")
	fs.StringVar(&o.tls.keyFile, "tls-key-file", "", "the key of --tls-cert-file (PEM)")
	fs.StringVar(&o.tls.clientCAFile, "client-ca-file", "", "require client certificates signed by this CA (mTLS for clients; members use their peer certificate)")
	fs.StringVar(&o.tls.peerCertFile, "peer-cert-file", "", "this member's certificate for mutual TLS with its peers (Raft and node-to-node HTTP)")
	fs.StringVar(&o.tls.peerKeyFile, "peer-key-file", "", "the key of --peer-cert-file")
	fs.StringVar(&o.tls.peerCAFile, "peer-ca-file", "", "the cluster (peer) CA: a member accepts only peers whose certificate it signed")
	fs.DurationVar(&o.http.idleTimeout, "http-idle-timeout", 2*time.Minute, "close a kept-alive HTTP connection idle this long")
	fs.DurationVar(&o.http.readHeaderTimeout, "http-header-timeout", 10*time.Second, "time allowed for a request's TLS handshake and headers")
	fs.DurationVar(&o.http.bodyTimeout, "http-body-timeout", time.Minute, "time allowed to receive a request's body, from the end of its headers")
	fs.IntVar(&o.http.maxConnections, "max-connections", 4096, "most HTTP connections open at once; more wait to be accepted")
	fs.IntVar(&o.http.maxHeaderBytes, "max-header-bytes", 64<<10, "largest request line and headers, in bytes")
	fs.BoolVar(&o.failpoints, "failpoints", false, "testing only: enable /v1/internal/failpoints (cut Raft links, skew the clock)")
	return fs
}

// validate checks the options, naming the flag at fault.
func (o *options) validate() error {
	o.limits.SessionTTL = o.sessionTTL.Milliseconds()
	switch {
	case o.limits.SessionTTL < 1000:
		return errors.New("--session-ttl must be at least 1s")
	case o.limits.SessionBytes < 1<<20:
		return errors.New("--session-bytes must be at least 1 MiB (1048576)")
	case o.limits.SessionsPerTenant < 1:
		return errors.New("--sessions-per-tenant must be at least 1")
	case o.limits.IdemBytes < 1<<20:
		return errors.New("--idempotency-bytes must be at least 1 MiB (1048576)")
	case o.gcHeadroom < 0:
		return errors.New("--gc-headroom must not be negative (0: Go's default GOGC)")
	case o.limits.MaxStateBytes < 0:
		return errors.New("--max-state-bytes must not be negative (0: no limit)")
	case o.limits.IdemTenantBytes < 64<<10 || o.limits.IdemTenantBytes > o.limits.IdemBytes:
		return errors.New("--idempotency-tenant-bytes must be at least 64 KiB and at most --idempotency-bytes")
	case o.limits.SessionTenantBytes != 0 && (o.limits.SessionTenantBytes < 256<<10 || o.limits.SessionTenantBytes > o.limits.SessionBytes):
		return errors.New("--session-tenant-bytes must be at least 256 KiB and at most --session-bytes (0: a quarter of it)")
	}
	if o.limits.SessionTenantBytes == 0 {
		o.limits.SessionTenantBytes = o.limits.SessionBytes / 4
	}
	switch {
	case o.id == "" && o.dataDir == "":
		return errors.New("--id and --data-dir are required (see --help)")
	case o.id == "":
		return errors.New("--id is required (see --help)")
	case o.dataDir == "":
		return errors.New("--data-dir is required (see --help)")
	}
	if o.peers != "" && o.join != "" {
		return errors.New("give --peers or --join, not both")
	}
	if err := o.tls.validate(); err != nil {
		return err
	}
	if o.http.maxConnections < 1 || o.http.maxHeaderBytes < 1 || o.http.idleTimeout <= 0 ||
		o.http.readHeaderTimeout <= 0 || o.http.bodyTimeout <= 0 {
		return errors.New("--max-connections, --max-header-bytes and the --http-*-timeout flags must be positive")
	}
	return o.validateNode()
}

// defaultMaxStateBytes is a quarter of the machine's memory (MemTotal in
// /proc/meminfo), or 4 GiB where that cannot be read.
func defaultMaxStateBytes() int64 {
	const fallback = 4 << 30
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return fallback
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb > 0 {
				return kb * 1024 / 4
			}
		}
	}
	return fallback
}

func adminToken(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading --admin-token-file: %w", err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("--admin-token-file %s is empty", file)
	}
	if t := strings.TrimSpace(os.Getenv("BATON_ADMIN_TOKEN")); t != "" {
		return t, nil
	}
	return "", errors.New("no admin token: give --admin-token-file or set BATON_ADMIN_TOKEN")
}

func newLogger(lv slog.Level, format, file string, stderr io.Writer) (*slog.Logger, func(), error) {
	out, closeFn := stderr, func() {}
	if file != "" {
		f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		out, closeFn = f, func() { f.Close() }
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(out, opts)), closeFn, nil
	}
	return slog.New(slog.NewTextHandler(out, opts)), closeFn, nil
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	o, err := parseFlags(args, os.LookupEnv, os.Environ(), stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "batond:", err)
		return 2
	}
	log, closeLog, err := newLogger(o.level, o.logFormat, o.logFile, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "batond:", err)
		return 2
	}
	defer closeLog()
	if len(o.unknownEnv) > 0 {
		log.Warn("ignoring environment variables that name no batond flag", "vars", strings.Join(o.unknownEnv, ","))
	}
	if err := serve(ctx, o, log); err != nil {
		log.Error("batond stopped", "err", err)
		fmt.Fprintln(stderr, "batond:", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, o *options, log *slog.Logger) error {
	token, err := adminToken(o.adminTokenFile)
	if err != nil {
		return err
	}
	if err := installRaftMetrics(); err != nil {
		return err
	}
	peer, api, err := o.tls.load()
	if err != nil {
		return err
	}
	expiry, err := certExpiry(peer, api)
	if err != nil {
		return err
	}
	if err := prometheus.DefaultRegisterer.Register(expiry); err != nil {
		return err
	}
	switch {
	case api == nil:
		log.Warn("TLS is off: the HTTP API and the Raft port accept anyone who can reach them, and tokens travel in clear text; " +
			"give --tls-cert-file/--tls-key-file and --peer-cert-file/--peer-key-file/--peer-ca-file (batond certs makes them)")
	case peer == nil:
		log.Warn("peer TLS is off: the Raft port accepts anyone who can reach it, and node-to-node calls carry the admin token; " +
			"give --peer-cert-file, --peer-key-file and --peer-ca-file (batond certs makes them)")
	}
	cfg := o.nodeConfig()
	cfg.Logger, cfg.PeerTLS = log, peer
	if o.failpoints {
		cfg.Faults = node.NewFaults()
		log.Warn("failpoints enabled: this node obeys link cuts and clock skew set over HTTP; never use in production")
	}
	ln, err := net.Listen("tcp", o.httpAddr)
	if err != nil {
		return fmt.Errorf("HTTP listen on %s: %w", o.httpAddr, err)
	}
	f := fsm.NewWith(fsm.Options{WatchHistoryBytes: o.watchHistoryBytes})
	n, err := node.Open(cfg, f)
	if err != nil {
		ln.Close()
		return err
	}
	defer n.Close()
	chunks, err := chunkstore.Open(filepath.Join(o.dataDir, "chunks"), chunkstore.WithCompression(chunkstore.Compression(o.chunkCompression)))
	if err != nil {
		return fmt.Errorf("chunk store: %w", err)
	}
	defer chunks.Close()
	bi := buildinfo.Get()
	scfg := server.Config{Build: server.Build{Version: bi.Version, Commit: bi.Commit, GoVersion: bi.GoVersion}, AdminToken: token, IdempotencyTTL: o.idemTTL, BodyTimeout: o.http.bodyTimeout, Limits: o.limits, MaxWatchesPerPrincipal: o.maxWatches, StoreScanMax: o.storeScanMax, Faults: cfg.Faults,
		Chunks: chunks, ChunkGCGrace: o.chunkGCGrace, Logger: log, PeerTLS: peer, MaxCheckpointBytes: o.maxCheckpointBytes, MaxBlobReadBytes: o.maxBlobReadBytes, ChunkCopyBacklog: o.chunkCopyBacklog, MCP: o.mcp,
		ConsoleDisabled: o.consoleDisabled}
	if api != nil {
		scfg.PeerClientTLS = tlsconf.HTTPClientConfig(peer)
	}
	srv := server.New(scfg, n, f)
	srv.Start()
	defer srv.Close()
	hs := newHTTPServer(srv.Handler(), o.http, log)
	ln = netutil.LimitListener(ln, o.http.maxConnections)
	if api != nil {
		tc := api.ServerConfig()
		tc.NextProtos = []string{"http/1.1"}
		ln = tls.NewListener(ln, tc)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("batond serving", "id", o.id, "http", o.httpAddr, "raft", o.raftAddr,
		"advertise_http", cfg.HTTPAddr, "advertise_raft", n.RaftAddr(),
		"tls", api != nil, "peer_tls", peer != nil, "client_certs", api != nil && api.ClientCA != nil)
	if o.pprofAddr != "" {
		go servePprof(o.pprofAddr, log)
	}
	if o.gcHeadroom > 0 && os.Getenv("GOGC") == "" {
		go gctune.Run(ctx, o.gcHeadroom, time.Second)
	}
	if o.join != "" {
		jc := &http.Client{}
		if api != nil || strings.HasPrefix(o.join, "https://") {
			jc.Transport = &http.Transport{TLSClientConfig: tlsconf.HTTPClientConfig(peer)}
		}
		if peer != nil {
			token = "" // the peer certificate vouches for this node
		}
		go joinLoop(ctx, o, token, jc, log)
	}
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	// End streams (watches) and background loops first, then give requests
	// in flight a short grace period; connections that never sent a
	// request would otherwise hold Shutdown for 5 s.
	srv.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		hs.Close()
	}
	return nil
}

// installRaftMetrics sends hashicorp/raft's go-metrics (and the node's own
// timers) to Prometheus as baton_<key>, renamed to Prometheus' conventions
// by metricsink.
func installRaftMetrics() error {
	sink := metricsink.New("baton")
	if err := prometheus.DefaultRegisterer.Register(sink); err != nil {
		return err
	}
	mc := metrics.DefaultConfig("") // the sink adds the prefix: no per-call key copy
	mc.EnableHostname = false
	mc.EnableRuntimeMetrics = false
	_, err := metrics.NewGlobal(mc, sink)
	return err
}

// servePprof exposes the Go profiler on its own listener, apart from the API.
func servePprof(addr string, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	log.Info("pprof serving", "addr", addr)
	if err := http.ListenAndServe(addr, mux); err != nil {
		log.Error("pprof", "err", err)
	}
}

// validateNode checks the addresses, peers, logging and Raft settings.
func (o *options) validateNode() error {
	if o.logFormat != "text" && o.logFormat != "json" {
		return fmt.Errorf("--log-format %q: want text or json", o.logFormat)
	}
	if err := o.level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	for _, a := range []struct{ listen, listenFlag, adv, advFlag string }{
		{o.httpAddr, "--http-addr", o.advertiseHTTP, "--advertise-http-addr"},
		{o.raftAddr, "--raft-addr", o.advertiseRaft, "--advertise-raft-addr"},
	} {
		host, err := checkHostPort(a.listen, true)
		if err != nil {
			return fmt.Errorf("%s %q: %v", a.listenFlag, a.listen, err)
		}
		if a.adv != "" {
			h, err := checkHostPort(a.adv, false)
			if err != nil {
				return fmt.Errorf("%s %q: %v", a.advFlag, a.adv, err)
			}
			if isWildcard(h) {
				return fmt.Errorf("%s %q: a wildcard address is not reachable; give the address peers dial", a.advFlag, a.adv)
			}
		} else if isWildcard(host) {
			return fmt.Errorf("%s %q listens on every interface, which peers cannot dial: give %s (the host:port peers reach this node at)",
				a.listenFlag, a.listen, a.advFlag)
		}
	}
	var err error
	if o.peerList, err = node.ParsePeers(o.peers); err != nil {
		return fmt.Errorf("--peers: %w", err)
	}
	if len(o.peerList) > 0 {
		found := false
		for _, p := range o.peerList {
			found = found || string(p.ID) == o.id
		}
		if !found {
			return fmt.Errorf("--peers %q does not list this node's --id %q", o.peers, o.id)
		}
	}
	if o.join != "" {
		u, err := url.Parse(o.join)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--join %q: want the URL of a running node, e.g. https://10.0.0.1:7001", o.join)
		}
	}
	if o.pprofAddr != "" {
		if _, err := checkHostPort(o.pprofAddr, true); err != nil {
			return fmt.Errorf("--pprof-addr %q: %v", o.pprofAddr, err)
		}
	}
	switch o.raft.LogStore {
	case "", node.LogStoreWAL, node.LogStoreBolt:
	default:
		return fmt.Errorf("--raft-log %q: want %s or %s", o.raft.LogStore, node.LogStoreWAL, node.LogStoreBolt)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"--heartbeat-timeout", o.raft.HeartbeatTimeout}, {"--election-timeout", o.raft.ElectionTimeout},
		{"--leader-lease-timeout", o.raft.LeaderLeaseTimeout}, {"--commit-timeout", o.raft.CommitTimeout},
		{"--snapshot-interval", o.raft.SnapshotInterval}, {"--idempotency-ttl", o.idemTTL},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s %v: must be positive", d.name, d.v)
		}
	}
	switch {
	case o.raft.LeaderLeaseTimeout > o.raft.HeartbeatTimeout:
		return fmt.Errorf("--leader-lease-timeout %v must not exceed --heartbeat-timeout %v", o.raft.LeaderLeaseTimeout, o.raft.HeartbeatTimeout)
	case o.raft.SnapshotThreshold < 1:
		return errors.New("--snapshot-threshold must be at least 1")
	case o.raft.MaxAppendEntries < 1:
		return errors.New("--max-append-entries must be at least 1")
	case o.raft.MaxInflightEntries < 1:
		return errors.New("--max-inflight-entries must be at least 1")
	case o.watchHistoryBytes < 1<<20:
		return errors.New("--watch-history-bytes must be at least 1 MiB (1048576)")
	case o.maxWatches < 0:
		return errors.New("--max-watches-per-principal must not be negative (0: no cap)")
	case o.storeScanMax < 1:
		return errors.New("--store-scan-max must be at least 1")
	case o.mcp.MaxSessions < 1:
		return errors.New("--mcp-max-sessions must be at least 1 (--mcp-disable turns /mcp off)")
	case o.mcp.IdleTimeout < time.Second:
		return errors.New("--mcp-idle-timeout must be at least 1s")
	case o.chunkGCGrace < 0:
		return errors.New("--chunk-gc-grace must not be negative")
	case !validCompression(o.chunkCompression):
		return fmt.Errorf("--chunk-compression %q: want none or zstd", o.chunkCompression)
	case o.maxCheckpointBytes < 1:
		return errors.New("--max-checkpoint-bytes must be at least 1")
	case o.maxBlobReadBytes < 1:
		return errors.New("--max-blob-read-bytes must be at least 1")
	case o.chunkCopyBacklog < 1:
		return errors.New("--chunk-copy-backlog-bytes must be at least 1")
	}
	cfg := o.nodeConfig()
	return cfg.Validate() // a backstop: every rule it has is checked above, by flag
}

// checkHostPort checks a host:port; listen allows an empty host and port 0.
func checkHostPort(addr string, listen bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", errors.New("want host:port")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || (!listen && n == 0) {
		return "", fmt.Errorf("port %q: want a number from 1 to 65535", port)
	}
	if !listen && host == "" {
		return "", errors.New("the host is missing")
	}
	return host, nil
}

func isWildcard(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// advertisedHTTP is the HTTP address this node announces to its peers.
func (o *options) advertisedHTTP() string {
	if o.advertiseHTTP != "" {
		return o.advertiseHTTP
	}
	return o.httpAddr
}

// advertisedRaft is the Raft address this node announces to its peers.
func (o *options) advertisedRaft() string {
	if o.advertiseRaft != "" {
		return o.advertiseRaft
	}
	return o.raftAddr
}

// nodeConfig is the Raft node's configuration (without TLS, faults and
// logger, which serve adds).
func (o *options) nodeConfig() node.Config {
	cfg := o.raft
	cfg.ID, cfg.DataDir, cfg.RaftAddr, cfg.HTTPAddr = o.id, o.dataDir, o.raftAddr, o.advertisedHTTP()
	cfg.RaftAdvertise = o.advertiseRaft
	cfg.Peers = o.peerList
	return cfg
}

func validCompression(s string) bool {
	_, err := chunkstore.ParseCompression(s)
	return err == nil
}
