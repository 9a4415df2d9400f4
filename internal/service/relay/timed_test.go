//go:build !bench

package relay_test

// timed says whether the tests hold the code to their wall-clock bounds:
// only with -tags bench (timed_bench_test.go), on a machine left alone.
// Those bounds measure the machine as much as the code; by default the
// tests log the figures and check what the code did.
const timed = false
