module github.com/httpretry/httpretry

go 1.26

require (
	github.com/hashicorp/go-cleanhttp v0.5.2
	github.com/jonboulle/clockwork v0.5.0
)
