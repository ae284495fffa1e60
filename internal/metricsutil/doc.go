// Package metricsutil holds what httpretry's metric adapters
// (contrib/promretry, contrib/otelretry) share and that is not a label
// value: how a retry budget is read for a gauge, and which budget a
// Transport uses. It has no dependencies beyond the standard library and
// httpretry, so that any adapter can use it. The label and attribute
// values themselves are in [github.com/httpretry/httpretry/internal/metricsutil/labels].
package metricsutil
