package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

const dlqTable = "email_dispatch_dlq_log"

// sqlModes are the session modes a dead message must be kept whole under:
// MariaDB's default (strict for transactional tables) and none at all, in
// which MySQL truncates a value too long for its column with only a warning.
var sqlModes = map[string]string{
	"strict":     "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION",
	"not strict": "",
}

// inMode runs fn on one connection of db whose session has sql_mode mode.
func inMode(t *testing.T, db *gorm.DB, mode string, fn func(conn *gorm.DB)) {
	t.Helper()
	require.NoError(t, db.Connection(func(conn *gorm.DB) error {
		require.NoError(t, conn.Exec("SET SESSION sql_mode = ?", mode).Error)
		fn(conn)
		return conn.Exec("SET SESSION sql_mode = DEFAULT").Error
	}))
}

// deadLetter is a dead message with the given headers (a JSON object) and body.
func deadLetter(headers string, body []byte) *store.DeadLetter {
	return &store.DeadLetter{
		DedupKey:   store.DeadLetterKey("q.dlq", "m-1", 0, []byte(headers+string(body))),
		Queue:      "q.dlq",
		RoutingKey: "q.dlq",
		MessageID:  "m-1",
		Body:       body,
		Headers:    headers,
		RetryCount: 3,
		DeadAt:     time.Now().UTC(),
	}
}

// bigHeaders is a headers object with one header value of n bytes.
func bigHeaders(t *testing.T, n int) (string, string) {
	t.Helper()
	value := strings.Repeat("0123456789abcdef", n/16+1)[:n]
	raw, err := json.Marshal(map[string]any{"x-big": value, "x-email-retry-count": 3})
	require.NoError(t, err)
	return string(raw), value
}

// randomBody is n bytes of every value, quotes, backslashes and NULs included.
func randomBody(n int) []byte {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// A header of 70 KB (more than a TEXT column holds) is stored and read back
// whole, whether the session's sql_mode is strict or not.
func TestDeadLetterWithA70KBHeaderIsStoredWhole(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	headers, value := bigHeaders(t, 70_000)
	for name, mode := range sqlModes {
		t.Run(name, func(t *testing.T) {
			inMode(t, db, mode, func(conn *gorm.DB) {
				dl := deadLetter(headers, []byte(`{"email":"`+name+`"}`))
				saved, err := store.NewDeadLetters(conn).Save(ctx, dlqTable, dl)
				require.NoError(t, err)
				require.True(t, saved)
				got, err := store.NewDeadLetters(conn).Get(ctx, dlqTable, dl.ID)
				require.NoError(t, err)
				require.Len(t, got.Headers, len(headers), "stored header bytes")
				var h map[string]any
				require.NoError(t, json.Unmarshal([]byte(got.Headers), &h))
				require.Len(t, h["x-big"].(string), len(value))
				require.Equal(t, value, h["x-big"], "the header value differs")
				require.Equal(t, dl.Body, got.Body)
			})
		})
	}
}

// A body of 17 MB (more than a MEDIUMBLOB, and more than MariaDB's default
// 16 MiB max_allowed_packet) is stored and read back byte for byte.
func TestDeadLetterWithA17MBBodyIsStoredWhole(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	headers, _ := bigHeaders(t, 70_000)
	body := randomBody(17_000_000)
	for name, mode := range sqlModes {
		t.Run(name, func(t *testing.T) {
			inMode(t, db, mode, func(conn *gorm.DB) {
				dl := deadLetter(headers, append([]byte(name), body...))
				saved, err := store.NewDeadLetters(conn).Save(ctx, dlqTable, dl)
				require.NoError(t, err)
				require.True(t, saved)
				got, err := store.NewDeadLetters(conn).Get(ctx, dlqTable, dl.ID)
				require.NoError(t, err)
				require.Len(t, got.Body, len(dl.Body), "stored body bytes")
				require.True(t, bytes.Equal(dl.Body, got.Body), "the body differs")
				require.Len(t, got.Headers, len(headers), "stored header bytes")
				require.Equal(t, headers, got.Headers, "the headers differ")
				t.Logf("stored body %d bytes, headers %d bytes, in %d pieces", got.BodyBytes, got.HeadersBytes, got.Parts)
			})
		})
	}
}

// A redelivered dead message is one row, and so is a large one; nothing
// else is ignored.
func TestDeadLetterRedeliveredIsStoredOnce(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	for _, body := range [][]byte{[]byte(`{"email":"a@example.com"}`), randomBody(1 << 20)} {
		dl := deadLetter("{}", body)
		saved, err := store.NewDeadLetters(db).Save(ctx, dlqTable, dl)
		require.NoError(t, err)
		require.True(t, saved)
		again := *dl
		again.ID = 0
		saved, err = store.NewDeadLetters(db).Save(ctx, dlqTable, &again)
		require.NoError(t, err)
		require.False(t, saved, "stored before")
	}
	var n int
	require.NoError(t, db.Raw("SELECT COUNT(*) FROM "+dlqTable).Scan(&n).Error)
	require.Equal(t, 2, n)
}

// A database that keeps less than it was given (here a trigger that cuts
// the headers; in a non-strict sql_mode, any value too long for its column)
// makes the save fail, loudly, instead of keeping a damaged copy.
func TestDeadLetterDamagedByTheDatabaseIsRefused(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	require.NoError(t, db.Exec("CREATE TRIGGER cut_headers BEFORE INSERT ON "+dlqTable+
		" FOR EACH ROW SET NEW.headers = LEFT(NEW.headers, 10)").Error)
	headers, _ := bigHeaders(t, 1000)
	saved, err := store.NewDeadLetters(db).Save(ctx, dlqTable, deadLetter(headers, []byte(`{}`)))
	require.ErrorIs(t, err, store.ErrUnstorable)
	require.False(t, saved)
	var n int
	require.NoError(t, db.Raw("SELECT COUNT(*) FROM "+dlqTable).Scan(&n).Error)
	require.Zero(t, n, "no damaged row is kept")
}

// A row one of whose pieces is missing is read as incomplete, never as a
// shorter message.
func TestDeadLetterMissingAPieceIsIncomplete(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	dl := deadLetter("{}", randomBody(1<<20))
	saved, err := store.NewDeadLetters(db).Save(ctx, dlqTable, dl)
	require.NoError(t, err)
	require.True(t, saved)
	got, err := store.NewDeadLetters(db).Get(ctx, dlqTable, dl.ID)
	require.NoError(t, err)
	require.True(t, bytes.Equal(dl.Body, got.Body))
	require.NoError(t, db.Exec("DELETE FROM dlq_log_part WHERE log_id = ? AND seq = 1", dl.ID).Error)
	_, err = store.NewDeadLetters(db).Get(ctx, dlqTable, dl.ID)
	require.ErrorIs(t, err, store.ErrIncomplete)
}

// A listing reads each row whole, or only its sizes.
func TestListDeadLettersWholeOrSizesOnly(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	headers, _ := bigHeaders(t, 70_000)
	dl := deadLetter(headers, randomBody(1<<20))
	_, err := store.NewDeadLetters(db).Save(ctx, dlqTable, dl)
	require.NoError(t, err)
	rows, err := store.NewDeadLetters(db).List(ctx, dlqTable, store.DeadLetterFilter{})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.True(t, bytes.Equal(dl.Body, rows[0].Body))
	require.Equal(t, headers, rows[0].Headers)
	rows, err = store.NewDeadLetters(db).List(ctx, dlqTable, store.DeadLetterFilter{SizesOnly: true})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Empty(t, rows[0].Body)
	require.Empty(t, rows[0].Headers)
	require.EqualValues(t, len(dl.Body), rows[0].BodyBytes)
	require.EqualValues(t, len(headers), rows[0].HeadersBytes)
}
