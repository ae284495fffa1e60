// Package pgtest starts real PostgreSQL servers (and PgBouncer) for
// pgidempotency's tests: initdb in a temporary directory, a server on a
// free loopback port, stopped by the test. PostgreSQL refuses to run as
// root: as root, every program runs as the postgres user (runuser), in a
// directory that user owns.
//
// Missing programs skip the tests, except under CI=true, where they fail
// them: CI installs them (make deps).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrMissing is returned by Start when PostgreSQL's programs are not
// installed.
var ErrMissing = errors.New("pgtest: PostgreSQL not installed (initdb, postgres under /usr/lib/postgresql/*/bin or on PATH): install Debian's postgresql package (make deps)")

// Server is a PostgreSQL server started for tests.
type Server struct {
	Port int
	dir  string
	bin  string
	asPG bool // run programs as the postgres user
	dbs  atomic.Int64
}

// binDir finds the directory of initdb and pg_ctl: the newest
// /usr/lib/postgresql/N/bin, or PATH.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrMissing
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Start runs initdb in a new temporary directory and starts a server on a
// free loopback port. Stop it with Stop.
func Start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, asPG: os.Geteuid() == 0}
	if s.dir, err = os.MkdirTemp("", "pgtest-"); err != nil {
		return nil, err
	}
	if err := s.chown(s.dir); err != nil {
		s.remove()
		return nil, err
	}
	if out, err := s.run("initdb", "-D", s.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"); err != nil {
		s.remove()
		return nil, fmt.Errorf("pgtest: initdb: %v: %s", err, out)
	}
	if s.Port, err = FreePort(); err != nil {
		s.remove()
		return nil, err
	}
	opts := fmt.Sprintf("-h 127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off -c max_connections=300 -c shared_buffers=32MB", s.Port, s.dir)
	if out, err := s.run("pg_ctl", "-D", s.data(), "-l", filepath.Join(s.dir, "log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		s.remove()
		return nil, fmt.Errorf("pgtest: pg_ctl start: %v: %s\n%s", err, out, log)
	}
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// Dir is the server's temporary directory, owned by the user the server
// runs as.
func (s *Server) Dir() string { return s.dir }

// Stop stops the server at once and removes its directory.
func (s *Server) Stop() {
	_, _ = s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop")
	s.remove()
}

func (s *Server) remove() { _ = os.RemoveAll(s.dir) }

// run runs a program of the server's bin directory, as the postgres user
// when the test runs as root.
func (s *Server) run(prog string, args ...string) ([]byte, error) {
	return s.Command(filepath.Join(s.bin, prog), args...).CombinedOutput()
}

// Command returns a command that runs path as the user the server runs
// as.
func (s *Server) Command(path string, args ...string) *exec.Cmd {
	if s.asPG {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

// chown gives path to the postgres user when the test runs as root.
func (s *Server) chown(path string) error {
	if !s.asPG {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("pgtest: running as root needs the postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(path, uid, gid)
}

// Chown gives path to the user the server runs as.
func (s *Server) Chown(path string) error { return s.chown(path) }

// DSN is the connection string of database db, on port (the server's, or
// a proxy's in front of it).
func DSN(port int, db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", port, db)
}

// CreateDB creates a new, empty database and returns its name.
func (s *Server) CreateDB(ctx context.Context) (string, error) {
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), s.dbs.Add(1))
	conn, err := pgx.Connect(ctx, DSN(s.Port, "postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		return "", err
	}
	return name, nil
}

// FreePort returns a loopback port free at the time of the call.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Bouncer is a PgBouncer in transaction pooling mode in front of a
// Server.
type Bouncer struct {
	Port int
	cmd  *exec.Cmd
}

// ErrNoBouncer is returned by StartBouncer when pgbouncer is not
// installed.
var ErrNoBouncer = errors.New("pgtest: pgbouncer not installed: install Debian's pgbouncer package (make deps)")

// StartBouncer starts PgBouncer with pool_mode=transaction in front of
// database db of s: every transaction (every statement outside one) may
// run on another server connection, and no session state survives it.
func (s *Server) StartBouncer(db string) (*Bouncer, error) {
	path, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, e := os.Stat("/usr/sbin/pgbouncer"); e != nil {
			return nil, ErrNoBouncer
		}
		path = "/usr/sbin/pgbouncer"
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(s.dir, fmt.Sprintf("bouncer-%d", port))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	ini := fmt.Sprintf(`[databases]
%s = host=127.0.0.1 port=%d dbname=%s user=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 4
max_client_conn = 200
server_reset_query =
ignore_startup_parameters = extra_float_digits
logfile = %s
`, db, s.Port, db, port, filepath.Join(dir, "users.txt"), filepath.Join(dir, "log"))
	files := map[string]string{"pgbouncer.ini": ini, "users.txt": `"postgres" ""` + "\n"}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	for _, p := range []string{dir, filepath.Join(dir, "pgbouncer.ini"), filepath.Join(dir, "users.txt")} {
		if err := s.chown(p); err != nil {
			return nil, err
		}
	}
	// PgBouncer switches to the postgres user itself (-u), so that the
	// process started is PgBouncer's own, which Stop signals: runuser
	// would leave it running.
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if s.asPG {
		args = append([]string{"-u", "postgres"}, args...)
	}
	cmd := exec.Command(path, args...)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &Bouncer{Port: port, cmd: cmd}
	if err := waitListening(port, 10*time.Second); err != nil {
		b.Stop()
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		return nil, fmt.Errorf("pgtest: pgbouncer: %w\n%s", err, log)
	}
	return b, nil
}

// Stop stops PgBouncer at once (SIGTERM: its immediate shutdown; on
// platforms without it, a kill).
func (b *Bouncer) Stop() {
	if b.cmd.Process.Signal(syscall.SIGTERM) != nil {
		_ = b.cmd.Process.Kill()
	}
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
}

func waitListening(port int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Required reports whether a missing program fails the tests instead of
// skipping them: under CI (CI=true).
func Required() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v == "true" || v == "1"
}

// Restart stops the server at once (immediate mode: no checkpoint, every
// connection cut, as a crash does) and starts it again with the same
// options, on the same port.
func (s *Server) Restart() error {
	// The log file, as at Start: without one, the new server would write
	// to pg_ctl's output, which run waits on to close.
	if out, err := s.run("pg_ctl", "-D", s.data(), "-l", filepath.Join(s.dir, "log"), "-m", "immediate", "-w", "-t", "60", "restart"); err != nil {
		return fmt.Errorf("pgtest: pg_ctl restart: %v: %s", err, out)
	}
	return nil
}

// Pause stops every process of the server — the postmaster first, so
// that it forks no new backend, then each of its children — with
// SIGSTOP, as a host frozen or a VM paused does: connections stay open
// and nothing answers. resume continues them all (SIGCONT). Linux only
// (it reads /proc).
func (s *Server) Pause() (resume func() error, err error) {
	pidFile, err := os.ReadFile(filepath.Join(s.data(), "postmaster.pid"))
	if err != nil {
		return nil, fmt.Errorf("pgtest: pause: %w", err)
	}
	postmaster := strings.SplitN(string(pidFile), "\n", 2)[0]
	if err := signalAll(stopSignal, postmaster); err != nil {
		return nil, err
	}
	children, err := childrenOf(postmaster)
	switch {
	case err == nil && len(children) == 0:
		// A running server always has some (the checkpointer, the WAL
		// writer): none found is no pause.
		err = fmt.Errorf("pgtest: pause: no process of the server's but its postmaster %s", postmaster)
	case err == nil:
		err = signalAll(stopSignal, children...)
	}
	resume = func() error {
		if len(children) > 0 {
			if err := signalAll(contSignal, children...); err != nil {
				return err
			}
		}
		return signalAll(contSignal, postmaster)
	}
	if err != nil {
		_ = resume()
		return nil, err
	}
	return resume, nil
}

// childrenOf returns the ids of the processes whose parent is ppid.
func childrenOf(ppid string) ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	var pids []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid …: comm may hold spaces; it ends at the
		// last ')'.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		if f := strings.Fields(rest); len(f) > 1 && f[1] == ppid {
			pids = append(pids, e.Name())
		}
	}
	return pids, nil
}
