package app_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// The readiness dial takes the first of RABBITMQ_ADDRS that answers.
func TestDialAMQPSkipsAClosedAddress(t *testing.T) {
	t.Parallel()
	storetest.Services(t)
	closed := strings.Replace(storetest.AMQPURL(), "127.0.0.1:5672", "127.0.0.1:1", 1)
	cfg := config.AMQP{URL: closed, URLs: []string{closed, storetest.AMQPURL()}}
	conn, err := app.DialAMQP(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), cfg, t.Name())
	require.NoError(t, err)
	defer conn.Close()
	require.Equal(t, "127.0.0.1:5672", conn.RemoteAddr().String())
}
