package otelretry

import (
	"sync/atomic"

	"github.com/httpretry/httpretry/internal/labels"
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
// which carry the route only (and the connection use), and the series of
// each method, built when first needed.
type routeSeries struct {
	route string

	operationAttempts recordOpts
	operationWait     recordOpts
	operationDuration recordOpts
	attemptDuration   [len(labels.Conns)]recordOpts

	methods [labels.NumMethods]atomic.Pointer[methodSeries]
}

func newRouteSeries(route string) *routeSeries {
	r := attribute.String(keyRoute, route)
	s := &routeSeries{route: route}
	s.operationAttempts = newRecordOpts(r)
	// The three histograms share one attribute set; each keeps its own
	// slice only so that no caller can alias another's.
	s.operationWait = recordOpts{s.operationAttempts[0]}
	s.operationDuration = recordOpts{s.operationAttempts[0]}
	for i, c := range labels.Conns {
		s.attemptDuration[i] = newRecordOpts(r, attribute.String(keyConnection, c))
	}
	return s
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
	method, route string

	attempts  [len(labels.AttemptKinds)]addOpts
	successes [len(labels.AttemptKinds)]addOpts
	timeouts  [len(labels.Timeouts)]addOpts

	// operations is indexed by outcome*NumReasons + reason. Only a score of
	// the combinations can occur, so each is built on first use.
	operations []atomic.Pointer[addOpts]
}

func newMethodSeries(method, route string) *methodSeries {
	m, r := attribute.String(keyMethod, method), attribute.String(keyRoute, route)
	s := &methodSeries{method: method, route: route,
		operations: make([]atomic.Pointer[addOpts], labels.NumOutcomes*labels.NumReasons)}
	for i, k := range labels.AttemptKinds {
		s.attempts[i] = newAddOpts(m, r, attribute.String(keyAttemptKind, k))
		s.successes[i] = addOpts{s.attempts[i][0]}
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
		attribute.String(keyRoute, s.route),
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
