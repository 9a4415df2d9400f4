//go:build bench

package console_test

// timed: see timed_test.go.
const timed = true
