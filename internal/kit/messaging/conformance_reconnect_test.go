//go:build chaos

package messaging

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
)

// TestWatermillReconnect is the scenario of the universal suite's
// TestReconnect: 10,000 messages from 100 publishers while the machine's
// RabbitMQ application restarts twice (at a third and at a half of the
// publishes); every message published must arrive. It restarts the broker,
// so it runs only in the fault tier (scripts/chaos).
//
// The suite's own function is not called: it appends each published
// message to its list in a goroutine of its own and compares that list with
// what arrived as soon as the last message arrives, so a message that
// arrives before it is appended counts as "extra" (seen here: "received:
// 10000, sent: 9999"), and the list is read while written. Here the
// published set is complete before it is compared.
func TestWatermillReconnect(t *testing.T) {
	const messages, publishers = 10000, 100
	c := newConformance(t)
	pub, sub := c.pubSub(t)
	topic := conformancePrefix + watermill.NewUUID()
	require.NoError(t, sub.(message.SubscribeInitializer).SubscribeInitialize(topic))
	msgs, err := sub.Subscribe(context.Background(), topic)
	require.NoError(t, err)

	var mu sync.Mutex
	published := map[string]bool{}
	work := make(chan int)
	var restarts, senders sync.WaitGroup
	go func() {
		for i := range messages {
			if i == messages/3 || i == messages/2 {
				restarts.Go(func() { restart(t) })
			}
			work <- i
		}
		close(work)
	}()
	for range publishers {
		senders.Go(func() {
			for range work {
				msg := message.NewMessage(watermill.NewUUID(), []byte("x"))
				for pub.Publish(topic, msg) != nil {
					time.Sleep(500 * time.Millisecond) // the broker is restarting; the same message again
				}
				mu.Lock()
				published[msg.UUID] = true
				mu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	go func() {
		senders.Wait()
		restarts.Wait()
		close(done)
	}()

	received := map[string]bool{}
	deadline := time.After(4 * time.Minute)
	for finished := false; !finished || len(received) < messages; {
		select {
		case m := <-msgs:
			received[m.UUID] = true
			m.Ack()
		case <-done:
			finished, done = true, nil
		case <-deadline:
			t.Fatalf("%d of %d messages received after 4 minutes", len(received), messages)
		}
	}
	require.Len(t, published, messages)
	for id := range published {
		require.True(t, received[id], "message %s was published and never arrived", id)
	}
	for id := range received {
		require.True(t, published[id], "message %s arrived and was never published", id)
	}
	require.NoError(t, sub.Close())
}

// restart stops and starts the RabbitMQ application of this machine.
func restart(t *testing.T) {
	t.Helper()

	out, err := exec.Command("sh", "-c", "rabbitmqctl stop_app && sleep 1 && rabbitmqctl start_app").CombinedOutput()
	if err != nil {
		t.Errorf("restarting RabbitMQ: %v: %s", err, out)
	}
}
