//go:build mutation

package httpretry

// mutationBuild: this is make mutate's build, which leaves out the tests
// that wait real time (realTime).
const mutationBuild = true
