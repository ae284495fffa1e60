module github.com/httpretry/httpretry/contrib/pgidempotency

go 1.26.0

// Builds and tests in this repository use the modules of the working
// tree; a program that requires this module gets the versions required
// below (replace applies only here). See docs/RELEASING.md.
replace github.com/httpretry/httpretry => ../..

require (
	github.com/httpretry/httpretry v0.1.0
	github.com/jackc/pgx/v5 v5.13.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/jonboulle/clockwork v0.5.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)
