package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"

	"github.com/httpretry/httpretry/httptestutil"
)

// The throttle's scenarios for what sits between a client and a server,
// and for callers that send little:
//
//   - throttle-proxy: the outage of throttle-outage, but the backend dies
//     (its connections close unanswered) behind a real nginx, which
//     answers 502; httputil.ReverseProxy where nginx is not installed
//     (and never in CI, where a missing nginx fails the run);
//   - throttle-lowrate: P processes each calling a healthy server 1.5
//     times a second, 2% of whose answers are 503 at random.

// Settings of throttle-lowrate.
const (
	lowRateProcesses = 100
	lowRatePerProc   = 1.5  // operations a second per process
	lowRateFail      = 0.02 // share of requests answered 503
)

// proxyFront returns a front for runSheddingVia: a real nginx in front
// of the backend, or httputil.ReverseProxy when nginx is not installed
// outside CI; name says which.
func proxyFront() (front func(backend string) (string, func()), name string, err error) {
	probe, err := httptestutil.StartNginx(httptestutil.NginxConfig{Upstream: "127.0.0.1:9"})
	switch {
	case err == nil:
		probe.Close()
		return nginxFront, "nginx", nil
	case errors.Is(err, httptestutil.ErrNoNginx) && os.Getenv("CI") != "true":
		return reverseProxyFront, "httputil.ReverseProxy (nginx not installed)", nil
	}
	return nil, "", err
}

// nginxFront starts nginx in front of backend.
func nginxFront(backend string) (string, func()) {
	u, err := url.Parse(backend)
	if err != nil {
		panic(err) // a URL of this command's server: cannot happen
	}
	n, err := httptestutil.StartNginx(httptestutil.NginxConfig{Upstream: u.Host})
	if err != nil {
		panic(fmt.Sprintf("storm: nginx started once and not again: %v", err))
	}
	return n.URL, func() { n.Close() }
}

// reverseProxyFront starts httputil.ReverseProxy in front of backend; it
// answers 502 when the backend closes a connection unanswered.
func reverseProxyFront(backend string) (string, func()) {
	u, err := url.Parse(backend)
	if err != nil {
		panic(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	srv := httptest.NewServer(rp)
	return srv.URL, srv.Close
}

// deadSchedule is healthy, the backend dead, healthy again.
func (c tconfig) deadSchedule() []phase {
	return []phase{
		{name: "healthy", dur: c.healthy},
		{name: "dead", dur: c.outage, mode: dead},
		{name: "recovery", dur: c.healthy},
	}
}

// lowRateSchedule is one healthy phase whose server answers lowRateFail
// of requests 503.
func (c tconfig) lowRateSchedule() []phase {
	return []phase{{name: "flaky", dur: c.lowRateDur, mode: flaky, fail: lowRateFail}}
}

// proxyLine reports throttle-proxy: the throttle's load during the
// outage and its recovery, against a single attempt through the same
// proxy.
func proxyLine(res *tresults) (string, []target, bool) {
	s, t := findT(res.proxy, keySingle), findT(res.proxy, keyThrottle)
	if s == nil || t == nil {
		return "", nil, false
	}
	m := measureOutage(t, s)
	var others []string
	for _, r := range res.proxy {
		if r.policy.key != keyThrottle && r.policy.key != keySingle {
			o := measureOutage(r, s)
			others = append(others, fmt.Sprintf("%s: load %.2fx, recovery %s", r.policy.name, o.load, recoveryText(o.recovery, o.recovered)))
		}
	}
	l := fmt.Sprintf("throttle-proxy: outage behind a proxy, load %.2fx, recovery %s", m.load, recoveryText(m.recovery, m.recovered))
	l = withOthers(l+", through "+res.proxyName, others)
	return l, []target{
		{name: "proxy: server load during the outage behind " + res.proxyName + " ≤ 0.25× offered", measured: fmt.Sprintf("%.3f×", m.load), met: m.load <= maxOutageLoad},
		{name: "proxy: ≥ 95% of single attempt's goodput within 2 s of healing", measured: recoveryText(m.recovery, m.recovered), met: m.recovered && m.recovery <= maxRecovery},
	}, true
}

// lowRateLine reports throttle-lowrate: the operations the throttle
// refused, and the failed operations of each policy.
func lowRateLine(res *tresults) (string, []target, bool) {
	t := findT(res.lowrate, keyThrottle)
	if t == nil {
		return "", nil, false
	}
	refused := countLocal(t, 0)
	var others []string
	for _, r := range res.lowrate {
		st := r.phaseStats()[0]
		others = append(others, fmt.Sprintf("%s: %d failed", r.policy.name, st.failed))
	}
	l := fmt.Sprintf("throttle-lowrate: healthy at %g/s with %g%% 503s, refused %d of %d", lowRatePerProc, 100*lowRateFail, refused, len(t.ops))
	l = withOthers(l+fmt.Sprintf(", %d processes", t.processes), others)
	return l, []target{
		{name: "lowrate: operations refused by the throttle at 1.5/s per process with 2% 503s = 0", measured: fmt.Sprintf("%d of %d", refused, len(t.ops)), met: refused == 0 && len(t.ops) > 0},
	}, true
}
