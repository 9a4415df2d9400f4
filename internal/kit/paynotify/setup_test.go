package paynotify_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eisland/isle/internal/kit/paynotify"
)

// RSA key generation takes a while: the tests share one set of keys, and
// a second set stands for "someone else's keys".
var (
	testKeys  = sync.OnceValues(paynotify.GenerateTestKeys)
	otherKeys = sync.OnceValues(paynotify.GenerateTestKeys)
)

func keys(t *testing.T) paynotify.TestKeys {
	t.Helper()
	k, err := testKeys()
	require.NoError(t, err)
	return k
}

func others(t *testing.T) paynotify.TestKeys {
	t.Helper()
	k, err := otherKeys()
	require.NoError(t, err)
	return k
}
