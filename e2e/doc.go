// Package e2e runs Isle's binaries as child processes against the real
// services, each test with its own database, key prefix and exchange prefix.
// It holds no code of its own beyond helpers; the tests are the point.
package e2e
