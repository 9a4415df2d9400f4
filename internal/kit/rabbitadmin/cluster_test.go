package rabbitadmin_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// With several management URLs, a request goes to the first that answers;
// one that answers with an error (here, a wrong password) is not skipped.
func TestManagementURLList(t *testing.T) {
	t.Parallel()
	storetest.Services(t)
	admin, err := rabbitadmin.New("http://guest:guest@127.0.0.1:1,"+storetest.ManagementURL(), "/")
	require.NoError(t, err)
	require.NoError(t, admin.Ping(context.Background()))
	_, err = admin.Snapshot(context.Background())
	require.NoError(t, err)

	bad, err := url.Parse(storetest.ManagementURL())
	require.NoError(t, err)
	bad.User = url.UserPassword(bad.User.Username(), "wrong")
	wrong, err := rabbitadmin.New(bad.String()+","+storetest.ManagementURL(), "/")
	require.NoError(t, err)
	require.ErrorContains(t, wrong.Ping(context.Background()), "401")

	none, err := rabbitadmin.New("http://guest:secret@127.0.0.1:1,http://guest:secret@127.0.0.1:2", "/")
	require.NoError(t, err)
	err = none.Ping(context.Background())
	require.ErrorContains(t, err, "127.0.0.1:1")
	require.ErrorContains(t, err, "127.0.0.1:2")
	require.NotContains(t, err.Error(), "secret")

	_, err = rabbitadmin.New("http://127.0.0.1:15672,not a url", "/")
	require.ErrorContains(t, err, "is not absolute")
}
