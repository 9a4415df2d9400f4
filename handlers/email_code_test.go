package handlers_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// sentMemo sends a mail once per key, as store.SentMails does, in memory.
type sentMemo struct {
	mu   sync.Mutex
	sent map[string]bool
}

func newSentMemo() *sentMemo { return &sentMemo{sent: map[string]bool{}} }

func (s *sentMemo) SendOnce(ctx context.Context, key string, send func(context.Context) error) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent[key] {
		return false, nil
	}
	if err := send(ctx); err != nil {
		return false, err
	}
	s.sent[key] = true
	return true, nil
}

func TestEmailCodeIsMailedUnlessExpired(t *testing.T) {
	dir := t.TempDir()
	m, err := mail.Open("file://"+dir+"?from=no-reply%40isle.test", mail.Options{})
	require.NoError(t, err)
	h := handlers.NewCodeMailer(m, newSentMemo(), quiet)

	msg := topology.EmailCodeDispatch{Email: "ann@example.com", Scene: "LOGIN", Code: "482913", CreatedAtEpochSeconds: time.Now().Unix()}
	for range 2 { // a redelivery sends nothing
		require.NoError(t, h.Handle(t.Context(), msg))
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.eml"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	raw, err := os.ReadFile(files[0])
	require.NoError(t, err)
	require.Contains(t, string(raw), "To: <ann@example.com>")
	require.Contains(t, string(raw), "482913")

	old := msg
	old.Code, old.CreatedAtEpochSeconds = "111111", time.Now().Add(-6*time.Minute).Unix()
	require.NoError(t, h.Handle(t.Context(), old), "an expired code is dropped, not retried")
	files, _ = filepath.Glob(filepath.Join(dir, "*.eml"))
	require.Len(t, files, 1, "and not mailed")
}

func TestEmailCodeMailerDownIsRetried(t *testing.T) {
	m, err := mail.Open("smtp://127.0.0.1:1?tls=none&from=no-reply%40isle.test", mail.Options{Timeout: time.Second})
	require.NoError(t, err)
	err = handlers.NewCodeMailer(m, newSentMemo(), quiet).Handle(t.Context(),
		topology.EmailCodeDispatch{Email: "ann@example.com", Scene: "REGISTER", Code: "123456", CreatedAtEpochSeconds: time.Now().Unix()})
	require.Error(t, err)
	require.False(t, messaging.IsPermanent(err), "a mailer that is down may come back: %v", err)
}
