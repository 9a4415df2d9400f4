package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/eisland/isle/internal/service/console"
	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/stretchr/testify/require"
)

// The API routes each page and action of the console, and nothing else
// under /admin/ but the login and logout, to the admin role: the routes
// table and the OpenAPI document list what the console serves
// (TestOpenAPIListsExactlyTheRoutesServed checks the second half).
func TestTheAPIRoutesEveryPageOfTheConsole(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var want, got []string
	for _, rt := range console.Routes() {
		want = append(want, rt.Method+" /admin"+rt.Path)
	}
	for _, rt := range b.srv.Routes() {
		if !strings.HasPrefix(rt.Path, "/admin/") || rt.Path == "/admin/login" || rt.Path == "/admin/logout" {
			continue
		}
		got = append(got, rt.Method+" "+rt.Path)
		require.Equal(t, []httpapi.Role{httpapi.RoleAdmin}, rt.Roles, rt.Path)
		require.Equal(t, httpapi.AdminCookie, rt.Cookie, rt.Path)
	}
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(t, want, got)
	require.Contains(t, got, http.MethodGet+" /admin/", "the overview")
}
