package httpapi

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A token verified once is not verified again while it is valid, and a
// remembered token still expires: after its exp plus the leeway it is
// refused as parse refuses it.
func TestVerifiedTokensStillExpire(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef")
	now := time.Now()
	a := newAuthenticator(secret, 5*time.Second, func() time.Time { return now })
	tok, err := MintToken(secret, "svc", RoleService, time.Minute, now)
	require.NoError(t, err)
	p, err := a.check(tok)
	require.NoError(t, err)
	require.Equal(t, Principal{Subject: "svc", Role: RoleService}, p)
	require.Len(t, a.valid, 1, "remembered")

	now = now.Add(time.Minute + 4*time.Second) // within the leeway
	_, err = a.check(tok)
	require.NoError(t, err)
	now = now.Add(2 * time.Second) // past it
	_, err = a.check(tok)
	require.ErrorContains(t, err, "token expired")

	_, err = a.check(tok + "x")
	require.Error(t, err, "a token that differs is verified on its own")
}
