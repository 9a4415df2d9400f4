//go:build bench

package relay_test

// timed: see timed_test.go.
const timed = true
