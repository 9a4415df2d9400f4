//go:build chaos

package messaging

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
)

// TestWatermillReconnect is the universal suite's reconnect test: 10,000
// messages from 100 publishers while the machine's RabbitMQ application
// restarts twice; every message must arrive. It restarts the broker, so it
// runs only in the fault tier (scripts/chaos).
func TestWatermillReconnect(t *testing.T) {
	features := conformanceFeatures
	features.RestartServiceCommand = []string{"sh", "-c", "rabbitmqctl stop_app && sleep 1 && rabbitmqctl start_app"}
	c := newConformance(t)
	tests.TestReconnect(t, tests.TestContext{TestID: tests.NewTestID(), Features: features}, c.pubSub)
}
