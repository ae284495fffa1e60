//go:build !mutation

package httpretry

// mutationBuild: this is not make mutate's build; every test runs.
const mutationBuild = false
