module github.com/httpretry/httpretry/bench

go 1.26.0

// Builds and tests in this repository use the modules of the working
// tree; a program that requires this module gets the versions required
// below (replace applies only here). See docs/RELEASING.md.
replace github.com/httpretry/httpretry => ../

replace github.com/httpretry/httpretry/contrib/redisretry => ../contrib/redisretry

require (
	github.com/PuerkitoBio/rehttp v1.4.0
	github.com/cristalhq/hedgedhttp v0.9.2
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/hashicorp/go-cleanhttp v0.5.2
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/httpretry/httpretry v0.1.0
	github.com/httpretry/httpretry/contrib/redisretry v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
	gonum.org/v1/plot v0.17.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/jonboulle/clockwork v0.5.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/text v0.28.0 // indirect
)
