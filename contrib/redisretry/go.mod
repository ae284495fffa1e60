module github.com/httpretry/httpretry/contrib/redisretry

go 1.26.0

// Builds and tests in this repository use the modules of the working
// tree; a program that requires this module gets the versions required
// below (replace applies only here). See docs/RELEASING.md.
replace github.com/httpretry/httpretry => ../..

require (
	github.com/httpretry/httpretry v0.1.0
	github.com/jonboulle/clockwork v0.5.0
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
