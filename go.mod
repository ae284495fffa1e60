module github.com/httpretry/httpretry

go 1.26

require (
	github.com/hashicorp/go-cleanhttp v0.5.2
	github.com/jonboulle/clockwork v0.5.0
	go.uber.org/goleak v1.3.0
)

require github.com/stretchr/testify v1.12.1 // indirect
