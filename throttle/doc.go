// Package throttle is client-side adaptive throttling and rate-limit
// quota pacing for HTTP clients: a [Throttle] refuses some requests to a
// destination while it signals overload, and paces by the quota its
// responses announce ([ParseRateLimit]), so that a struggling or metered
// server is not kept busy with work it will refuse.
//
// httpretry's Transport uses it through its Throttle field. It can also
// be used alone, like golang.org/x/time/rate: look a request's
// destination up with [Throttle.Dest], ask [Throttle.Admit] before
// sending, and tell [Throttle.Record] how the answer went.
//
//	th := &throttle.Throttle{}
//	d := th.Dest(req)
//	ticket, _, err := th.Admit(d, req, nil)
//	if err != nil {
//		return err // refused locally: errors.Is(err, throttle.ErrThrottled)
//	}
//	resp, err := client.Do(req)
//	if err != nil {
//		ticket.Refund() // when the request is known not to have been sent
//	}
//	th.Record(d, &throttle.Result{
//		Status: status(resp), Header: header(resp), Overload: overloaded(resp, err),
//	}, nil)
package throttle
