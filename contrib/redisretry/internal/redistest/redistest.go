// Package redistest starts a real redis-server for tests: on a free
// loopback port, without persistence, as a child of the test binary.
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
// redis-server must be on PATH; if it is not, Start fails the test (it
// never skips), naming the package to install.
package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Binary is the name of the server program looked up on PATH.
const Binary = "redis-server"

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 15 * time.Second

// Server is one redis-server process on 127.0.0.1. Its methods are safe
// for concurrent use.
type Server struct {
	port int
	dir  string   // the server's working directory
	args []string // more arguments for redis-server

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
	if _, err := exec.LookPath(Binary); err != nil {
		return nil, fmt.Errorf("redistest: %s is not on PATH: install the redis-server package "+
			"(make deps, or apt-get install redis-server; on macOS brew install redis): %w", Binary, err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	s := &Server{port: port, dir: dir, args: args}
	if err := s.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before the server binds it; start reports that clearly.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--dir", s.dir, "--daemonize", "no", "--logfile", ""}, s.args...)
	cmd := exec.Command(Binary, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: starting %s: %w", Binary, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	if err := waitPing(s.Addr(), exited); err != nil {
		cmd.Process.Kill()
		<-exited
		return fmt.Errorf("redistest: %s on port %d: %w; its output:\n%s", Binary, s.port, err, out.String())
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
// waits for its PING; it fails tb when it cannot.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.start(); err != nil {
		tb.Fatal(err)
	}
}

// Close kills the server if it runs and removes its directory.
func (s *Server) Close() error {
	s.Kill()
	return os.RemoveAll(s.dir)
}
