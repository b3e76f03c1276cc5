// Package pgbench runs the suite's queue workload against PostgreSQL:
// claim-next with SELECT ... FOR UPDATE SKIP LOCKED, then a fenced update
// to done, measured by bench/loadgen like Baton. It starts its own server
// in a temporary data directory (initdb), with synchronous_commit = on.
package pgbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/baton-dev/baton/bench/peers/proc"
	"github.com/jackc/pgx/v5"
)

// Server is a PostgreSQL server started by the benchmark.
type Server struct {
	BinDir string
	dir    string
	port   int
	proc   *proc.Proc
}

// FindBinDir returns the newest /usr/lib/postgresql/*/bin holding initdb.
func FindBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL found under /usr/lib/postgresql/*/bin (apt-get install postgresql)")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// credential is who runs the server: the "postgres" user when we are root
// (PostgreSQL refuses to run as root), else ourselves.
func credential() (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, os.Getuid(), os.Getgid(), nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("running as root needs a postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid, gid, nil
}

// Start runs initdb in dir and starts the server on a free loopback port
// with synchronous_commit = on and fsync on, and waits until it accepts
// connections.
func Start(ctx context.Context, binDir, dir string, maxConns int) (*Server, error) {
	cred, uid, gid, err := credential()
	if err != nil {
		return nil, err
	}
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	for _, d := range []string{dir, sock} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(d, uid, gid); err != nil {
			return nil, err
		}
	}
	initdb := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	ports, err := proc.FreePorts(1)
	if err != nil {
		return nil, err
	}
	s := &Server{BinDir: binDir, dir: dir, port: ports[0]}
	args := []string{"-D", data, "-p", strconv.Itoa(s.port), "-k", sock,
		"-c", "listen_addresses=127.0.0.1", "-c", "synchronous_commit=on", "-c", "fsync=on",
		"-c", fmt.Sprintf("max_connections=%d", maxConns+20), "-c", "shared_buffers=512MB"}
	logPath := filepath.Join(dir, "postgres.log")
	p, err := proc.Start(filepath.Join(binDir, "postgres"), args, nil, logPath, cred)
	if err != nil {
		return nil, err
	}
	s.proc = p
	if err := s.waitReady(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("%w; see %s", err, logPath)
	}
	return s, nil
}

// URL is the connection string.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Connect opens one connection.
func (s *Server) Connect(ctx context.Context) (*pgx.Conn, error) {
	return pgx.Connect(ctx, s.URL())
}

func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if s.proc.Exited() {
			return errors.New("postgres exited during start")
		}
		c, err := s.Connect(ctx)
		if err == nil {
			c.Close(ctx)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres not ready: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close stops the server with SIGTERM (PostgreSQL's smart shutdown, which
// waits for clients: close connections first), SIGKILL after 20 s.
func (s *Server) Close() error { return s.proc.Stop(20 * time.Second) }
