// Package spread provides an [http.RoundTripper] that spreads requests
// over the addresses a host resolves to, so that the retry of an attempt
// that failed, or the hedge of one that is slow, goes to another
// instance of the service rather than down the pooled connection to the
// same one.
//
// [net/http.Transport] pools connections per host and port, never per
// address: when a host resolves to several addresses (DNS round robin, a
// headless Kubernetes service, several load-balancer addresses), a retry
// most often reuses a connection to the instance that just failed, and
// over HTTP/2 always, since one connection carries every request. A
// [Transport] keeps one pooled *http.Transport per address and dials
// that address while the request keeps its URL: the TLS server name, the
// certificate check, the Host header and HTTP/2 stay those of the
// hostname.
//
// Used as the Base of an httpretry.Transport, it learns which addresses
// the earlier attempts of the same operation were sent to, hedges
// included, and sends the next to an address not yet tried:
//
//	client.Transport = &httpretry.Transport{Base: &spread.Transport{}}
//
// It ejects an address that keeps failing, for a time that grows while it
// keeps failing, never more than a share of the host's addresses at once.
package spread
