package store_test

import (
	"testing"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// A result recorded again (the provider's callback resent), or a failure
// after a pass, leaves the row as it was, updated_at included: only a
// change of status writes.
func TestIdentityResultRecordedAgainChangesNoRow(t *testing.T) {
	t.Parallel()
	db, rdb := storetest.MySQL(t), storetest.Redis(t)
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	d, _ := tp.Domain(topology.DomainIdentityMaterial)
	ids := store.NewIdentities(db, rdb)
	read := func(certifyID string) store.IdentityVerification {
		var row store.IdentityVerification
		require.NoError(t, db.Where("certify_id = ?", certifyID).Take(&row).Error)
		return row
	}

	pass := store.VerificationResult{Username: "ivy", CertifyID: "c-1", Passed: true, MaterialInfo: `{"enc":1}`}
	_, err = ids.Record(t.Context(), d, pass)
	require.NoError(t, err)
	first := read("c-1")
	for _, again := range []store.VerificationResult{pass, {Username: "ivy", CertifyID: "c-1"}} {
		rec, err := ids.Record(t.Context(), d, again)
		require.NoError(t, err)
		require.Equal(t, store.IdentityPassed, rec.Row.Status)
		require.Equal(t, first, read("c-1"), "passed=%v recorded again", again.Passed)
	}

	fail := store.VerificationResult{Username: "amy", CertifyID: "c-2"}
	_, err = ids.Record(t.Context(), d, fail)
	require.NoError(t, err)
	failed := read("c-2")
	require.Equal(t, store.IdentityFailed, failed.Status)
	_, err = ids.Record(t.Context(), d, fail)
	require.NoError(t, err)
	require.Equal(t, failed, read("c-2"), "a failure recorded again")
}
