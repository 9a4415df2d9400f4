// Package storetest gives tests real, isolated services: a fresh migrated
// MySQL database, a Redis key prefix, and an AMQP connection with a name
// prefix of their own, each removed when the test ends. Nothing here touches
// the database, keys or queues of a locally running fleet.
//
// The services are found through ISLE_TEST_MYSQL_DSN (a DSN without a
// database; default root@tcp(127.0.0.1:3306)/), ISLE_TEST_REDIS_ADDR
// (default 127.0.0.1:6379) and ISLE_TEST_AMQP_URL (default
// amqp://guest:guest@127.0.0.1:5672/). A service that is down fails the test:
// scripts/test starts them. With -short every test that needs one is
// skipped (Services), so `go test -short ./...` runs with none up.
package storetest

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// Services skips t under -short: the test needs the real MySQL, Redis or
// RabbitMQ. Every helper here that reaches one calls it; a test that dials
// a service itself calls it first.
func Services(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs MySQL, Redis and RabbitMQ: not run with -short")
	}
}

// Environment variables of the test harness.
const (
	EnvMySQL = "ISLE_TEST_MYSQL_DSN"
	EnvRedis = "ISLE_TEST_REDIS_ADDR"
	EnvAMQP  = "ISLE_TEST_AMQP_URL"
	EnvAdmin = "ISLE_TEST_RABBITMQ_MANAGEMENT_URL"
)

// MySQLServerDSN is the DSN of the test server, without a database.
func MySQLServerDSN() string {
	return cmp.Or(os.Getenv(EnvMySQL), "root@tcp(127.0.0.1:3306)/")
}

// RedisAddr is the address of the test Redis.
func RedisAddr() string { return cmp.Or(os.Getenv(EnvRedis), "127.0.0.1:6379") }

// AMQPURL is the URL of the test RabbitMQ.
func AMQPURL() string { return cmp.Or(os.Getenv(EnvAMQP), "amqp://guest:guest@127.0.0.1:5672/") }

// ManagementURL is the URL of the test RabbitMQ's management API.
func ManagementURL() string {
	return cmp.Or(os.Getenv(EnvAdmin), "http://guest:guest@127.0.0.1:15672")
}

// Unique returns a short random name that starts with a letter.
func Unique(prefix string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return strings.ToLower(prefix) + hex.EncodeToString(b)
}
