package handlers_test

import (
	"testing"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// Every domain of the contract with a main queue has a consumer in the
// registry or is listed as not consumed by Isle, with a reason — never
// neither, never both; the registry names no domain the contract lacks.
func TestEveryDomainIsConsumedOrSaysWhyNot(t *testing.T) {
	t.Parallel()
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	consumed := map[string]bool{}
	for _, c := range handlers.Consumers {
		require.False(t, consumed[c.Domain], "%s registered twice", c.Domain)
		consumed[c.Domain] = true
		_, ok := tp.Domain(c.Domain)
		require.True(t, ok, "the registry names %q, which the topology lacks", c.Domain)
		require.NotNil(t, c.New, c.Domain)
	}
	for _, d := range tp.Domains() {
		if d.Queue == "" {
			continue
		}
		why, skipped := handlers.NotConsumed[d.Name]
		switch {
		case consumed[d.Name] && skipped:
			t.Errorf("%s is consumed and also listed as not consumed", d.Name)
		case !consumed[d.Name] && !skipped:
			t.Errorf("%s has a main queue (%s) but no consumer: add one to handlers.Consumers, or say why not in handlers.NotConsumed", d.Name, d.Queue)
		case skipped && why == "":
			t.Errorf("%s is not consumed, without a reason", d.Name)
		}
	}
	for name := range handlers.NotConsumed {
		_, ok := tp.Domain(name)
		require.True(t, ok, "NotConsumed names %q, which the topology lacks", name)
	}
}
