// Package spreadtest starts the other side of a spread.Transport for
// tests and scenarios: several backends on loopback addresses that share
// one port behind one hostname, a resolver that answers their addresses,
// and, for TLS, a certificate authority and a certificate for the
// hostname only, so that a client that dialed an address but checked the
// certificate against anything but the hostname fails.
//
// On Linux every address of 127.0.0.0/8 reaches the loopback interface,
// so 127.0.0.2 to 127.0.0.5 need no set-up; elsewhere [Start] fails to
// listen on them.
package spreadtest
