// Package redistest is a package for testing code against real
// redis-server processes: each on a free loopback port, without
// persistence, as a child of the test binary. It starts one server
// ([Start]), a Redis Cluster of several masters with replicas
// ([StartCluster]), or a primary, a replica and three sentinels
// ([StartSentinel]); a [Proxy] in front of a server loses chosen replies
// or commands, and a [LatencyProxy] puts the server milliseconds away.
//
//	func TestX(t *testing.T) {
//		srv := redistest.Start(t)    // stopped when the test ends
//		rdb := srv.Client(t)         // closed when the test ends
//		…
//		srv.Kill()                   // a crash
//		srv.Restart(t)               // the same port again, empty
//	}
//
// A package that shares one server among its tests starts it from
// TestMain with [New] and stops it with [Server.Close].
//
// redis-server (and, for a Cluster, redis-cli; for Sentinel,
// redis-sentinel) must be on PATH; if one is not, the test fails (it never
// skips), naming the Debian package to install.
package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Binary is the name of the server program looked up on PATH.
const Binary = "redis-server"

// debianPackage names the Debian package that installs each program the
// package starts.
var debianPackage = map[string]string{
	Binary:           "redis-server",
	"redis-cli":      "redis-tools",
	"redis-sentinel": "redis-sentinel",
}

// lookPath finds program on PATH, or says which package installs it.
func lookPath(program string) error {
	if _, err := exec.LookPath(program); err != nil {
		return fmt.Errorf("redistest: %s is not on PATH: install the %s package "+
			"(make deps, or apt-get install %[2]s; on macOS brew install redis): %w", program, debianPackage[program], err)
	}
	return nil
}

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 15 * time.Second

// Server is one redis-server process on 127.0.0.1. Its methods are safe
// for concurrent use.
type Server struct {
	port int
	bin  string   // the program: Binary or redis-sentinel
	conf string   // a configuration file given before args, or ""
	dir  string   // the server's working directory
	args []string // more arguments for the program

	mu     sync.Mutex    // protects cmd and exited
	cmd    *exec.Cmd     // nil while stopped
	exited chan struct{} // closed when cmd has exited
}

// Start starts a server for tb and stops it when tb ends; it fails tb
// when the server cannot start. args are more redis-server arguments,
// such as "--maxmemory", "100mb".
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	s, err := New(args...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// New starts a server on a free loopback port, with more redis-server
// arguments args, and waits until it answers PING. The caller must Close
// it.
func New(args ...string) (*Server, error) {
	if err := lookPath(Binary); err != nil {
		return nil, err
	}
	return newServer(Binary, false, "", args)
}

// newServer starts bin on a free port in a new directory. When bus is
// true the port plus 10000, a Cluster node's bus port, is free too. A
// non-empty conf is written to a configuration file given to bin before
// args.
func newServer(bin string, bus bool, conf string, args []string) (*Server, error) {
	port, err := freePort(bus)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	s := &Server{port: port, bin: bin, dir: dir, args: args}
	if conf != "" {
		s.conf = filepath.Join(dir, "redis.conf")
		if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redistest: %w", err)
		}
	}
	if err := s.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// freePort asks the kernel for a free loopback port; with bus, one whose
// Cluster bus port (plus 10000) is free as well. Another process may take
// it before the server binds it; start reports that clearly.
func freePort(bus bool) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("redistest: finding a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !bus {
			l.Close()
			return port, nil
		}
		if port+10000 <= 65535 {
			if lb, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000))); err == nil {
				lb.Close()
				l.Close()
				return port, nil
			}
		}
		l.Close()
	}
	return 0, errors.New("redistest: no free port with a free Cluster bus port (port+10000) in 100 tries")
}

// Addr returns the server's host:port, on 127.0.0.1.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Client returns a go-redis client of the server, closed when tb ends.
// Tests that need other settings build their own from [Server.Addr].
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// start runs redis-server and waits for its PING; it returns an error
// carrying the server's output when it exits or does not answer.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("redistest: server already running")
	}
	out := &bytes.Buffer{}
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(args,
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		// A replica syncs at once, not after the default 5 s wait
		// for others.
		"--repl-diskless-sync-delay", "0",
		"--dir", s.dir, "--daemonize", "no", "--logfile", "")
	args = append(args, s.args...)
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: starting %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	if err := waitPing(s.Addr(), exited); err != nil {
		cmd.Process.Kill()
		<-exited
		return fmt.Errorf("redistest: %s on port %d: %w; its output:\n%s", s.bin, s.port, err, out.String())
	}
	s.cmd, s.exited = cmd, exited
	return nil
}

// waitPing pings addr until it answers PONG, the server exits, or
// startTimeout passes.
func waitPing(addr string, exited <-chan struct{}) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, PoolSize: 1})
	defer rdb.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("exited before answering PING")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING within %v: %w", startTimeout, err)
		}
	}
}

// Kill stops the server at once with SIGKILL, as a crash would, and waits
// for it to exit. Its data is gone: the server keeps none on disk. Kill on
// a stopped server does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd, s.exited = nil, nil
}

// Restart starts a stopped server again on the same port, empty, and
// waits for its PING; it fails tb when it cannot. A Cluster node keeps
// its identity (its nodes file) and rejoins; a sentinel keeps its
// configuration file.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.start(); err != nil {
		tb.Fatal(err)
	}
}

// replicaOf makes the next start of s a replica of primary.
func (s *Server) replicaOf(primary *Server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	args := []string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.port)}
	for i := 0; i < len(s.args); i++ {
		if s.args[i] == "--replicaof" && i+2 < len(s.args) {
			i += 2
			continue
		}
		args = append(args, s.args[i])
	}
	s.args = args
}

// Start starts a stopped server again on the same port, as Restart does,
// for callers without a testing.TB.
func (s *Server) Start() error { return s.start() }

// Close kills the server if it runs and removes its directory.
func (s *Server) Close() error {
	s.Kill()
	return os.RemoveAll(s.dir)
}
