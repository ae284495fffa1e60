package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server child process on a free loopback port,
// without persistence: the shared store of the fleet scenario.
type redisServer struct {
	addr   string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startRedis starts redis-server and waits until it answers PING. It fails
// with a message naming the package when redis-server is not on PATH.
func startRedis() (*redisServer, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server is not on PATH, and the fleet scenario needs it: install the redis-server package "+
			"(make deps, or apt-get install redis-server; on macOS brew install redis): %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "storm-redis-")
	if err != nil {
		return nil, err
	}
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, exited: make(chan struct{})}
	s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no", "--logfile", "")
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	go func() {
		s.cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitPing(); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitPing pings the server until it answers, exits or 15s pass.
func (s *redisServer) waitPing() error {
	rdb := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		switch {
		case err == nil:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("redis-server on %s: no answer to PING: %w", s.addr, err)
		}
		select {
		case <-s.exited:
			return errors.New("redis-server exited before answering PING")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop kills the server, waits for it and removes its directory.
func (s *redisServer) stop() {
	s.cmd.Process.Kill()
	<-s.exited
	os.RemoveAll(s.dir)
}
