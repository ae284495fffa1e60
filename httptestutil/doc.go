// Package httptestutil scripts the failures a retrying HTTP client must
// handle, so that its tests can say exactly what the other side does on
// each attempt.
//
// A script is a list of [Step] values: the n-th request takes the n-th
// step, and once the script runs out the last step repeats, so a script of
// one step describes a server that always does the same thing. Each step
// has an [Action]: answer, close the connection, hang, trickle the body, or
// reset the connection halfway through the body.
//
// The package plays scripts in two places, for two kinds of test:
//
//   - [Server], an [net/http/httptest.Server] that acts out each step on
//     real connections, over HTTP/1.1 ([NewServer]) or HTTP/2 with TLS
//     ([NewTLSServer]). Use it to check what a real [net/http.Client] and
//     its connection pool make of a failure, and to prove with
//     [Server.NewConns] that connections were reused.
//   - [Transport], an in-memory [net/http.RoundTripper] that waits on a
//     [github.com/jonboulle/clockwork.Clock]. Use it as the Base of the
//     transport under test, with a fake clock, for tests that must be
//     deterministic and fast: every delay passes only when the test
//     advances the clock. A Transport step can also return any error, such
//     as [ErrRefused] or [ErrReset], which a real server cannot produce on
//     demand.
//
// The same script means the same thing to both, with two exceptions that
// follow from what each can do: only a Transport can return a Step's Err,
// and only a Server's failures go through a real client's connection
// handling, which may itself retry a request on a reused connection before
// the code under test sees anything. A test that counts attempts should
// give each test its own client, or use a Transport.
//
// Both record each request as a [Request] (method, path, query, headers,
// body and arrival number), so a test can check what was sent on every
// attempt, not only how many attempts there were.
//
// A typical fake-clock test runs the request in a goroutine, waits for it
// to block on the clock, and advances the clock past the delay:
//
//	clock := clockwork.NewFakeClock()
//	tr := httptestutil.NewTransport(clock,
//		httptestutil.Step{Status: 200, Body: "ok", Delay: time.Second},
//	)
//	go func() { resp, err = tr.RoundTrip(req); close(done) }()
//	clock.BlockUntilContext(ctx, 1) // the request is waiting out its Delay
//	clock.Advance(time.Second)
//	<-done
//
// Neither a Server nor a Transport leaves goroutines behind once its
// requests have ended, its response bodies are closed and, for a Server,
// Close has returned; tests may check that with go.uber.org/goleak.
package httptestutil
