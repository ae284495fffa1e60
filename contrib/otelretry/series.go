package otelretry

import (
	"sync/atomic"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/internal/metricsutil"
	"github.com/httpretry/httpretry/internal/metricsutil/labels"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Recording a measurement with attributes built on the spot allocates the
// attributes, their set and the option slice every time. The series below
// hold them ready, built once per label combination on first use, so that
// recording on the success path allocates nothing of this package's own.

// addOpts and recordOpts hold the option slice of one label combination.
// The slice itself is kept, not only the option: passing opts... through
// an interface method lets a fresh one-element slice escape to the heap.
type (
	addOpts    []metric.AddOption
	recordOpts []metric.RecordOption
)

func newAddOpts(kvs ...attribute.KeyValue) addOpts {
	return addOpts{metric.WithAttributeSet(attribute.NewSet(kvs...))}
}

func newRecordOpts(kvs ...attribute.KeyValue) recordOpts {
	return recordOpts{metric.WithAttributeSet(attribute.NewSet(kvs...))}
}

// routeSeries holds the options of one route: those of the histograms,
// which carry the route and a class from a fixed table, and the series of
// each method, built when first needed.
type routeSeries struct {
	route attribute.KeyValue

	operationAttempts recordOpts
	operationWait     recordOpts
	operationDuration [labels.NumOutcomes][labels.NumResults]recordOpts
	attemptDuration   [labels.NumConns][labels.NumResults]recordOpts
	retryWait         [labels.NumWaitCauses]recordOpts
	inFlight          addOpts

	// The durations of what got a response also carry its status code,
	// by the code's slot in the Metrics' statusTable: an attempt's by
	// connection, an operation's alone (its outcome and class follow from
	// the code). Each is built on first use.
	attemptStatus   [labels.NumConns][MaxStatusCodes]atomic.Pointer[recordOpts]
	operationStatus [MaxStatusCodes]atomic.Pointer[recordOpts]

	methods [labels.NumMethods]atomic.Pointer[methodSeries]
}

func newRouteSeries(route attribute.KeyValue) *routeSeries {
	r := route
	s := &routeSeries{route: route}
	s.operationAttempts = newRecordOpts(r)
	// These share one attribute set; each keeps its own slice only so
	// that no caller can alias another's.
	s.operationWait = recordOpts{s.operationAttempts[0]}
	s.inFlight = addOpts{metric.WithAttributeSet(attribute.NewSet(r))}
	// A successful operation carries no error.type; any other carries its
	// last attempt's result, as an attempt does.
	for i, o := range labels.Outcomes {
		for j, res := range labels.Results {
			s.operationDuration[i][j] = newRecordOpts(withError(i != labels.OutcomeSuccess, res,
				r, attribute.String(keyOutcome, o))...)
		}
	}
	for i, c := range labels.Conns {
		for j, res := range labels.Results {
			s.attemptDuration[i][j] = newRecordOpts(withError(j != labels.ResultSuccess, res,
				r, attribute.String(keyConnection, c), attribute.String(keyResult, res))...)
		}
	}
	for i, c := range labels.WaitCauses {
		s.retryWait[i] = newRecordOpts(r, attribute.String(keyWaitCause, c))
	}
	return s
}

// attemptWithStatus returns the options of the duration of an attempt on
// connection use conn that got a response with status code, whose slot
// is slot.
func (s *routeSeries) attemptWithStatus(conn, slot, code int) recordOpts {
	p := &s.attemptStatus[conn][slot]
	if o := p.Load(); o != nil {
		return *o
	}
	res := labels.Result(code, nil)
	o := newRecordOpts(withError(res != labels.ResultSuccess, labels.Results[res],
		s.route, attribute.String(keyConnection, labels.Conns[conn]),
		attribute.String(keyResult, labels.Results[res]), attribute.Int(keyStatusCode, code))...)
	p.CompareAndSwap(nil, &o)
	return *p.Load()
}

// operationWithStatus returns the options of the duration of an operation
// that returned a response with status code, whose slot is slot.
func (s *routeSeries) operationWithStatus(slot, code int) recordOpts {
	p := &s.operationStatus[slot]
	if o := p.Load(); o != nil {
		return *o
	}
	outcome := labels.Outcome(httpretry.Outcome{Status: code})
	o := newRecordOpts(withError(outcome != labels.OutcomeSuccess, labels.Results[labels.Result(code, nil)],
		s.route, attribute.String(keyOutcome, labels.Outcomes[outcome]), attribute.Int(keyStatusCode, code))...)
	p.CompareAndSwap(nil, &o)
	return *p.Load()
}

// withError appends error.type, set to class, to kvs when failed.
func withError(failed bool, class string, kvs ...attribute.KeyValue) []attribute.KeyValue {
	if failed {
		return append(kvs, attribute.String(keyErrorType, class))
	}
	return kvs
}

// method returns the series of the method at index m, creating it once.
func (s *routeSeries) method(m int) *methodSeries {
	if ms := s.methods[m].Load(); ms != nil {
		return ms
	}
	ms := newMethodSeries(methods[m], s.route)
	if s.methods[m].CompareAndSwap(nil, ms) {
		return ms
	}
	return s.methods[m].Load()
}

// methodSeries holds the options of one (method, route) pair.
type methodSeries struct {
	method string
	route  attribute.KeyValue

	attempts  [labels.NumAttemptKinds][labels.NumResults]addOpts
	started   [labels.NumAttemptKinds]addOpts
	successes [labels.NumAttemptKinds]addOpts
	timeouts  [labels.NumTimeouts]addOpts

	// operations is indexed by outcome*NumReasons + reason. Only a score of
	// the combinations can occur, so each is built on first use.
	operations []atomic.Pointer[addOpts]
}

func newMethodSeries(method string, route attribute.KeyValue) *methodSeries {
	m, r := attribute.String(keyMethod, method), route
	s := &methodSeries{method: method, route: route,
		operations: make([]atomic.Pointer[addOpts], labels.NumOutcomes*labels.NumReasons)}
	for i, k := range labels.AttemptKinds {
		kind := attribute.String(keyAttemptKind, k)
		s.started[i] = newAddOpts(m, r, kind)
		s.successes[i] = addOpts{s.started[i][0]}
		for j, res := range labels.Results {
			s.attempts[i][j] = newAddOpts(withError(j != labels.ResultSuccess, res,
				m, r, kind, attribute.String(keyResult, res))...)
		}
	}
	for i, k := range labels.Timeouts {
		s.timeouts[i] = newAddOpts(m, r, attribute.String(keyTimeoutKind, k))
	}
	return s
}

// operation returns the options of an operation's counter series.
func (s *methodSeries) operation(outcome, reason int) addOpts {
	p := &s.operations[outcome*labels.NumReasons+reason]
	if o := p.Load(); o != nil {
		return *o
	}
	o := newAddOpts(
		attribute.String(keyMethod, s.method),
		s.route,
		attribute.String(keyOutcome, labels.Outcomes[outcome]),
		attribute.String(keyStopReason, labels.Reasons[reason]),
	)
	p.CompareAndSwap(nil, &o)
	return *p.Load()
}

// phaseOpts holds the options of the phase histogram, one per phase.
var phaseOpts = func() (p [len(labels.Phases)]recordOpts) {
	for i, ph := range labels.Phases {
		p[i] = newRecordOpts(attribute.String(keyPhase, ph))
	}
	return p
}()

// budgetStateOpts holds the options of the budget state changes, one per
// state.
var budgetStateOpts = func() (p [len(metricsutil.States)]addOpts) {
	for i, st := range metricsutil.States {
		p[i] = newAddOpts(attribute.String(keyBudgetState, st))
	}
	return p
}()
