package httpapi

import (
	"context"
	"net/http"
	"sync"

	"github.com/eisland/isle/store"
)

// accountIDsMax bounds the account ids kept; a full cache starts over.
const accountIDsMax = 100_000

// accountIDs caches user_account.id by username. An id never changes for a
// username (accounts are neither renamed nor deleted), so an entry never
// goes stale; a username without an account is not cached, so an account
// created later is found at once.
type accountIDs struct {
	mu  sync.Mutex
	ids map[string]int64
}

func newAccountIDs() *accountIDs { return &accountIDs{ids: map[string]int64{}} }

func (c *accountIDs) get(username string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.ids[username]
	return id, ok
}

func (c *accountIDs) put(username string, id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ids) >= accountIDsMax {
		clear(c.ids)
	}
	c.ids[username] = id
}

// accountID returns the id of the caller's account (the token's sub is the
// username): 404 with reason no_account when the user has none, 503 when
// MySQL does not answer.
func (s *Server) accountID(ctx context.Context, username string) (int64, error) {
	if id, ok := s.accounts.get(username); ok {
		return id, nil
	}
	u, err := store.NewAccounts(s.backends.DB).Get(ctx, username)
	switch {
	case isNotFound(err):
		return 0, &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no account for " + username,
			Details: map[string]any{"reason": reasonNoAccount}}
	case err != nil:
		return 0, Unavailable("accounts", err)
	}
	s.accounts.put(username, int64(u.ID))
	return int64(u.ID), nil
}
