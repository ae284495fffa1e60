package httptestutil

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// ErrNoNginx is the error of [StartNginx] when no nginx program is found
// (Debian's nginx-light package installs one).
var ErrNoNginx = errors.New("httptestutil: no nginx program on PATH or in /usr/sbin")

// Nginx is a real nginx reverse proxy on a loopback port, in front of one
// upstream server, for tests that must see what a proxy makes of a dead or
// stuck backend: a 502 when the backend refuses the connection, a 504
// when it does not answer within the proxy's read timeout. It runs in the
// foreground, one process, with every file it writes in a temporary
// directory of its own.
type Nginx struct {
	// URL is the proxy's base URL, http://127.0.0.1:port.
	URL string

	dir  string
	cmd  *exec.Cmd
	done chan error // cmd.Wait's result
}

// NginxConfig is what [StartNginx] proxies to, and how long it waits.
type NginxConfig struct {
	// Upstream is the backend's host:port.
	Upstream string
	// ReadTimeout is nginx's proxy_read_timeout: how long it waits for
	// the backend's answer before a 504. 0 means 60s, nginx's default.
	ReadTimeout time.Duration
	// ConnectTimeout is nginx's proxy_connect_timeout. 0 means 1s.
	ConnectTimeout time.Duration
	// LimitReq is the rate of nginx's limit_req for every client
	// together ("2r/s", "6r/m"), with no burst: a request over it is
	// answered 429 by nginx itself, with no Retry-After and no
	// rate-limit fields, and never reaches the backend. "" means no
	// limit.
	LimitReq string
}

// nginxProgram returns the path of the nginx program.
func nginxProgram() (string, error) {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx", nil
	}
	return "", ErrNoNginx
}

// StartNginx starts nginx on a free loopback port, proxying every request
// to c.Upstream, and returns once it accepts connections. It never marks
// the upstream down (max_fails=0) and never tries a request twice
// (proxy_next_upstream off), so that each request a client sends reaches
// the backend at most once and is logged once. Close stops it and
// removes its directory. It returns [ErrNoNginx] when nginx is not
// installed.
func StartNginx(c NginxConfig) (*Nginx, error) {
	prog, err := nginxProgram()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "httptestutil-nginx-")
	if err != nil {
		return nil, fmt.Errorf("httptestutil: nginx directory: %w", err)
	}
	var lastErr error
	// A free port is found by listening and closing; another process may
	// take it before nginx binds it, so a failed start is tried again.
	for range 5 {
		n, err := startNginxOnce(prog, dir, c)
		if err == nil {
			return n, nil
		}
		lastErr = err
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// startNginxOnce writes the configuration for a free port and starts
// nginx on it.
func startNginxOnce(prog, dir string, c NginxConfig) (*Nginx, error) {
	port, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, nginxConf(dir, port, c), 0o600); err != nil {
		return nil, fmt.Errorf("httptestutil: nginx configuration: %w", err)
	}
	os.Remove(filepath.Join(dir, "access.log"))
	var stderr bytes.Buffer
	cmd := exec.Command(prog, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("httptestutil: starting nginx: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			return nil, fmt.Errorf("httptestutil: nginx exited (%v): %s%s", err, stderr.Bytes(), log)
		default:
		}
		if conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			conn.Close()
			return &Nginx{URL: "http://" + addr, dir: dir, cmd: cmd, done: done}, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	<-done
	return nil, fmt.Errorf("httptestutil: nginx did not listen on %s within 10s", addr)
}

// nginxConf is the configuration of a one-process nginx in dir on port.
func nginxConf(dir string, port int, c NginxConfig) []byte {
	read := c.ReadTimeout
	if read <= 0 {
		read = 60 * time.Second
	}
	connect := c.ConnectTimeout
	if connect <= 0 {
		connect = time.Second
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "daemon off;\nmaster_process off;\nworker_processes 1;\npid %s;\nerror_log %s warn;\n",
		filepath.Join(dir, "nginx.pid"), filepath.Join(dir, "error.log"))
	fmt.Fprintf(&b, "events { worker_connections 4096; }\n")
	fmt.Fprintf(&b, "http {\n access_log %s;\n", filepath.Join(dir, "access.log"))
	for _, t := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&b, " %s_temp_path %s;\n", t, filepath.Join(dir, t))
	}
	fmt.Fprintf(&b, " upstream backend { server %s max_fails=0; keepalive 64; }\n", c.Upstream)
	if c.LimitReq != "" {
		fmt.Fprintf(&b, " limit_req_zone $server_port zone=all:1m rate=%s;\n limit_req_status 429;\n", c.LimitReq)
	}
	fmt.Fprintf(&b, " server {\n  listen 127.0.0.1:%d;\n  location / {\n", port)
	if c.LimitReq != "" {
		fmt.Fprintf(&b, "   limit_req zone=all;\n")
	}
	fmt.Fprintf(&b, "   proxy_pass http://backend;\n   proxy_http_version 1.1;\n   proxy_set_header Connection \"\";\n")
	fmt.Fprintf(&b, "   proxy_next_upstream off;\n   proxy_read_timeout %dms;\n   proxy_connect_timeout %dms;\n",
		read.Milliseconds(), connect.Milliseconds())
	fmt.Fprintf(&b, "  }\n }\n}\n")
	return b.Bytes()
}

// freeLoopbackPort returns a loopback TCP port that was free a moment ago.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("httptestutil: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Requests returns how many requests nginx has logged: every request a
// client sent it, whatever its answer.
func (n *Nginx) Requests() (int, error) {
	f, err := os.Open(filepath.Join(n.dir, "access.log"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("httptestutil: nginx access log: %w", err)
	}
	defer f.Close()
	count := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		count++
	}
	return count, s.Err()
}

// Close stops nginx and removes its directory.
func (n *Nginx) Close() error {
	n.cmd.Process.Kill()
	<-n.done
	return os.RemoveAll(n.dir)
}
