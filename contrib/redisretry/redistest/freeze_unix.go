//go:build unix

package redistest

import "syscall"

// Freeze stops the server with SIGSTOP, as a hung host would: it keeps
// its connections and data, reads nothing and answers nothing until
// [Server.Thaw]; commands already written to it run then. Kill and Close
// work on a frozen server.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw lets a frozen server go on with SIGCONT.
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Signal(sig)
	}
}
