package handlers_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// A code's mail is sent once however often its message comes: one after
// the other (a redelivery, a retry copy, a DLQ replay) or at once (two
// workers); a delivery that meets another sending it is retried and then
// finds it sent.
func TestEmailCodeIsSentOncePerMessage(t *testing.T) {
	t.Parallel()
	m, err := mail.Open("file://"+t.TempDir()+"?from=no-reply%40isle.test", mail.Options{})
	require.NoError(t, err)
	counting := &countingMailer{Mailer: m}
	h := handlers.NewCodeMailer(counting, store.NewSentMails(storetest.Redis(t)), quiet)

	msg := topology.EmailCodeDispatch{Email: "ann@example.com", Scene: "LOGIN", Code: "482913", CreatedAtEpochSeconds: time.Now().Unix()}
	for range 3 {
		require.NoError(t, h.Handle(t.Context(), msg))
	}
	require.EqualValues(t, 1, counting.sends.Load(), "one mail for three deliveries")

	other := msg
	other.Code = "555111"
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for h.Handle(context.Background(), other) != nil {
				time.Sleep(time.Millisecond) // another delivery is sending it: as a retry would, later
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 2, counting.sends.Load(), "another code: one more mail, from eight deliveries at once")
}
