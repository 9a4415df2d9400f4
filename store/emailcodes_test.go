package store_test

import (
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

func limited(t *testing.T, err error) *store.ErrCodeLimited {
	t.Helper()
	var l *store.ErrCodeLimited
	require.ErrorAs(t, err, &l, "want a limit, got %v", err)
	return l
}

func TestEmailCodesKeepOnlyAnHMACAndLockAfterFiveWrong(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	codes := store.NewEmailCodes(r, []byte("pepper"))
	code, err := codes.Issue(t.Context(), "LOGIN", "Ann@Example.com", "10.0.0.1")
	require.NoError(t, err)
	require.Regexp(t, `^[0-9]{6}$`, code)
	stored, err := r.Client(keys.VerifyCode.DB).Get(t.Context(), r.Keys().Key(keys.VerifyCode, "LOGIN", "ann@example.com")).Result()
	require.NoError(t, err)
	require.Len(t, stored, 64)
	require.NotContains(t, stored, code)

	wrong := "000000"
	if code == wrong {
		wrong = "111111"
	}
	for left := 4; left >= 1; left-- {
		n, err := codes.Check(t.Context(), "LOGIN", "ann@example.com", wrong)
		require.ErrorIs(t, err, store.ErrCodeWrong)
		require.Equal(t, left, n)
	}
	_, err = codes.Check(t.Context(), "LOGIN", "ann@example.com", wrong)
	require.ErrorIs(t, err, store.ErrCodeLocked, "the fifth wrong code locks")
	_, err = codes.Check(t.Context(), "LOGIN", "ann@example.com", code)
	require.ErrorIs(t, err, store.ErrCodeLocked, "even the right code, once locked")
	_, err = codes.Check(t.Context(), "REGISTER", "ann@example.com", code)
	require.ErrorIs(t, err, store.ErrCodeNone, "a code is for its scene")
}

func TestEmailCodeIsUsedUpByAMatch(t *testing.T) {
	t.Parallel()
	codes := store.NewEmailCodes(storetest.Redis(t), []byte("pepper"))
	code, err := codes.Issue(t.Context(), "REGISTER", "bo@example.com", "10.0.0.2")
	require.NoError(t, err)
	_, err = codes.Check(t.Context(), "REGISTER", "BO@example.com", code)
	require.NoError(t, err, "letter case does not matter")
	_, err = codes.Check(t.Context(), "REGISTER", "bo@example.com", code)
	require.ErrorIs(t, err, store.ErrCodeNone)
}

func TestEmailCodeLimits(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	codes := store.NewEmailCodes(r, []byte("pepper"))
	ctx := t.Context()

	_, err := codes.Issue(ctx, "LOGIN", "cy@example.com", "10.0.0.3")
	require.NoError(t, err)
	l := limited(t, func() error { _, err := codes.Issue(ctx, "LOGIN", "cy@example.com", "10.0.0.4"); return err }())
	require.Equal(t, "cooldown", l.Limit)
	require.InDelta(t, 60, l.RetryAfter.Seconds(), 5)
	// The refusal counted against nothing: the hour counter is still 1.
	n, err := r.Client(keys.VerifyRateHour.DB).Get(ctx, r.Keys().Key(keys.VerifyRateHour, "cy@example.com")).Int()
	require.NoError(t, err)
	require.Equal(t, 1, n)

	// Another scene has its own cooldown, but the address's hourly limit is 3.
	for _, scene := range []string{"REGISTER", "RESET_PASSWORD"} {
		_, err := codes.Issue(ctx, scene, "cy@example.com", "10.0.0.5")
		require.NoError(t, err, scene)
	}
	l = limited(t, func() error { _, err := codes.Issue(ctx, "CHANGE_EMAIL", "cy@example.com", "10.0.0.6"); return err }())
	require.Equal(t, "email-hour", l.Limit)
	require.InDelta(t, 3600, l.RetryAfter.Seconds(), 10)

	// Three addresses from one IP, then the IP's limit.
	for _, a := range []string{"d1@example.com", "d2@example.com", "d3@example.com"} {
		_, err := codes.Issue(ctx, "LOGIN", a, "10.0.0.7")
		require.NoError(t, err, a)
	}
	require.Equal(t, "ip", limited(t, func() error { _, err := codes.Issue(ctx, "LOGIN", "d4@example.com", "10.0.0.7"); return err }()).Limit)

	// 30 a day, to the end of the UTC+8 day.
	day := r.Keys().Key(keys.VerifyRateDay, "ed@example.com")
	require.NoError(t, r.Client(keys.VerifyRateDay.DB).Set(ctx, day, 30, 5*time.Hour).Err())
	l = limited(t, func() error { _, err := codes.Issue(ctx, "LOGIN", "ed@example.com", "10.0.0.8"); return err }())
	require.Equal(t, "email-day", l.Limit)
	require.InDelta(t, 5*3600, l.RetryAfter.Seconds(), 10)

	// A day counter started by Issue expires at the end of the UTC+8 day.
	_, err = codes.Issue(ctx, "LOGIN", "fi@example.com", "10.0.0.9")
	require.NoError(t, err)
	ttl, err := r.Client(keys.VerifyRateDay.DB).PTTL(ctx, r.Keys().Key(keys.VerifyRateDay, "fi@example.com")).Result()
	require.NoError(t, err)
	now := time.Now().In(time.FixedZone("UTC+8", 8*3600))
	end := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, now.Location())
	require.InDelta(t, end.Sub(now).Seconds(), ttl.Seconds(), 5)
}
