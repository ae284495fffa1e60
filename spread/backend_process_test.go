package spread_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
)

// backendProcessEnv, set to an address, makes the test binary a backend
// process listening there (see TestMain): a real process the tests pause
// with SIGSTOP.
const backendProcessEnv = "SPREAD_TEST_BACKEND_PROCESS"

// serveBackendProcess listens on addr (port 0: any), prints the port,
// and answers every request 200 with its address, until killed.
func serveBackendProcess(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	host, _, _ := net.SplitHostPort(addr)
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, host)
	}))
}
