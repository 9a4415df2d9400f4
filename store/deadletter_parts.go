package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/eisland/isle/internal/kit/sqltx"
	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
)

// A dead message is kept whole (migration 00014). A body larger than
// deadLetterPartSize, or headers that a TEXT column cannot hold, go to
// dlq_log_part in pieces of at most deadLetterPartSize, written in the row's
// transaction, and the row's own column is left empty. Escaped, a statement
// carries at most twice the bytes it stores, so the largest (a row with a
// 256 KiB body, 64 KB of headers and 64 KB of last error) stays under
// 1 MiB: any server whose max_allowed_packet is that or more (every default
// since MySQL 5.5) keeps any message RabbitMQ delivers (128 MiB by default).
const (
	deadLetterPartSize = 256 << 10
	textColumnBytes    = 65535 // TEXT: headers, last_error
	varcharBytes       = 255   // VARCHAR(255), counted in bytes so that any text fits
	partTable          = "dlq_log_part"
)

// ErrUnstorable is returned by DeadLetters.Save when the database would not
// keep the dead message whole: it refused a value (too long, too large a
// packet) or kept less than it was given (a non-strict sql_mode, a trigger).
// Nothing is stored, and saving the same message again fails the same way
// until the database changes.
var ErrUnstorable = errors.New("store: the database cannot keep this dead message whole")

// ErrIncomplete is returned by DeadLetters.Get for a row some of whose bytes
// are missing (a piece deleted by hand, a size that does not add up).
var ErrIncomplete = errors.New("store: stored dead message is incomplete")

// part is one piece of a value kept in dlq_log_part.
type part struct {
	field string // "body" or "headers"
	seq   int
	data  []byte
}

// layout returns the row DeadLetters.Save inserts for dl and the pieces of the
// values too large for it. The text columns that only describe the message
// (routing key, type, ids, subject, last error) are made valid UTF-8 and cut
// to their column; the ids fit whole when they are AMQP short strings.
// Headers that are not valid UTF-8 go to pieces, which are bytes.
func layout(dl *DeadLetter) (DeadLetter, []part) {
	row := *dl
	row.ID = 0
	row.RoutingKey = fitText(dl.RoutingKey, varcharBytes)
	row.MessageType = fitText(dl.MessageType, varcharBytes)
	row.MessageID = fitText(dl.MessageID, varcharBytes)
	row.TraceID = fitText(dl.TraceID, varcharBytes)
	row.Subject = fitText(dl.Subject, varcharBytes)
	if dl.LastError != nil {
		s := fitText(*dl.LastError, textColumnBytes)
		row.LastError = &s
	}
	row.BodyBytes, row.HeadersBytes = int64(len(dl.Body)), int64(len(dl.Headers))
	var parts []part
	if len(dl.Body) > deadLetterPartSize {
		parts = append(parts, split("body", dl.Body)...)
		row.Body = nil
	}
	if row.Body == nil {
		row.Body = []byte{} // the column is NOT NULL
	}
	if len(dl.Headers) > textColumnBytes || !utf8.ValidString(dl.Headers) {
		parts = append(parts, split("headers", []byte(dl.Headers))...)
		row.Headers = ""
	}
	row.Parts = len(parts)
	return row, parts
}

func split(field string, b []byte) []part {
	var out []part
	for seq := 0; len(b) > 0; seq++ {
		n := min(len(b), deadLetterPartSize)
		out = append(out, part{field: field, seq: seq, data: b[:n]})
		b = b[n:]
	}
	return out
}

// fitText makes s valid UTF-8 (an invalid byte becomes U+FFFD) and at most
// n bytes, cut at a rune boundary.
func fitText(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func writeParts(tx *gorm.DB, table string, id uint64, parts []part) error {
	for _, p := range parts {
		err := tx.Exec("INSERT INTO "+partTable+" (log_table, log_id, field, seq, data) VALUES (?, ?, ?, ?, ?)",
			table, id, p.field, p.seq, p.data).Error
		if err != nil {
			return fmt.Errorf("%s piece %d: %w", p.field, p.seq, err)
		}
	}
	return nil
}

// errShortened is what verifySaved finds when the database kept less than it
// was given.
var errShortened = errors.New("the database kept less than it was given")

// savedSizes are what verifySaved compares, in its query's order.
var savedSizes = []string{"queue", "routing_key", "message_type", "message_id", "trace_id", "subject",
	"body", "headers", "last_error", "retry_count", "body_bytes", "headers_bytes", "parts", "pieces"}

// verifySaved reads back, in the transaction that wrote them, the sizes of
// row and its pieces, and fails with errShortened unless each is what was
// written: a non-strict sql_mode (or a trigger) keeps less without an error.
func verifySaved(tx *gorm.DB, table string, row *DeadLetter) error {
	got := make([]int64, len(savedSizes))
	dest := make([]any, len(got))
	for i := range got {
		dest[i] = &got[i]
	}
	err := tx.Raw(`SELECT LENGTH(t.queue), LENGTH(t.routing_key), LENGTH(t.message_type), LENGTH(t.message_id),
			LENGTH(t.trace_id), LENGTH(t.subject), LENGTH(t.body) + p.body, LENGTH(t.headers) + p.headers,
			IFNULL(LENGTH(t.last_error), -1), t.retry_count, t.body_bytes, t.headers_bytes, t.parts, p.n
		FROM `+table+` t CROSS JOIN (SELECT COUNT(*) AS n,
			IFNULL(SUM(IF(field = 'body', LENGTH(data), 0)), 0) AS body,
			IFNULL(SUM(IF(field = 'headers', LENGTH(data), 0)), 0) AS headers
			FROM `+partTable+` WHERE log_table = ? AND log_id = ?) p
		WHERE t.id = ?`, table, row.ID, row.ID).Row().Scan(dest...)
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	lastError := int64(-1)
	if row.LastError != nil {
		lastError = int64(len(*row.LastError))
	}
	want := []int64{int64(len(row.Queue)), int64(len(row.RoutingKey)), int64(len(row.MessageType)),
		int64(len(row.MessageID)), int64(len(row.TraceID)), int64(len(row.Subject)), row.BodyBytes, row.HeadersBytes,
		lastError, int64(row.RetryCount), row.BodyBytes, row.HeadersBytes, int64(row.Parts), int64(row.Parts)}
	if slices.Equal(got, want) {
		return nil
	}
	var diffs []string
	for i, name := range savedSizes {
		if got[i] != want[i] {
			diffs = append(diffs, fmt.Sprintf("%s %d of %d", name, got[i], want[i]))
		}
	}
	return fmt.Errorf("%w: %s", errShortened, strings.Join(diffs, ", "))
}

// MySQL errors about a value rather than the server: the same message fails
// the same way again.
const (
	errNumRowTooBig      = 1118
	errNumPacketTooLarge = 1153
	errNumBadString      = 1366
	errNumDataTooLong    = 1406
)

// unstorable reports whether err says the database cannot keep the message
// as it is (rather than being down, locked or slow).
func unstorable(err error) bool {
	switch sqltx.ErrNum(err) {
	case errNumRowTooBig, errNumPacketTooLarge, errNumBadString, errNumDataTooLong:
		return true
	}
	return errors.Is(err, errShortened) || errors.Is(err, mysql.ErrPktTooLarge)
}

// assemble completes dl, read from table, with the pieces of its values kept
// in dlq_log_part, and checks that it is whole. A row written before
// migration 00014 (no sizes, no pieces) is taken as it is.
func assemble(ctx context.Context, db *gorm.DB, table string, dl *DeadLetter) error {
	if dl.Parts > 0 {
		if err := readParts(ctx, db, table, dl); err != nil {
			return err
		}
	}
	legacy := dl.BodyBytes == 0 && dl.HeadersBytes == 0 && dl.Parts == 0
	if !legacy && (int64(len(dl.Body)) != dl.BodyBytes || int64(len(dl.Headers)) != dl.HeadersBytes) {
		return fmt.Errorf("%w: body %d of %d bytes, headers %d of %d", ErrIncomplete,
			len(dl.Body), dl.BodyBytes, len(dl.Headers), dl.HeadersBytes)
	}
	return nil
}

func readParts(ctx context.Context, db *gorm.DB, table string, dl *DeadLetter) error {
	rows, err := db.WithContext(ctx).Raw("SELECT field, seq, data FROM "+partTable+
		" WHERE log_table = ? AND log_id = ? ORDER BY field, seq", table, dl.ID).Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	sizes := map[string]int64{"body": dl.BodyBytes, "headers": dl.HeadersBytes}
	values := map[string][]byte{}
	pieces := map[string]int{}
	n := 0
	for rows.Next() {
		var field string
		var seq int
		var data sql.RawBytes
		if err := rows.Scan(&field, &seq, &data); err != nil {
			return err
		}
		size, known := sizes[field]
		if !known || seq != pieces[field] {
			return fmt.Errorf("%w: unexpected piece %s %d", ErrIncomplete, field, seq)
		}
		if pieces[field] == 0 {
			values[field] = make([]byte, 0, min(size, 1<<30))
		}
		values[field] = append(values[field], data...)
		pieces[field]++
		n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != dl.Parts {
		return fmt.Errorf("%w: %d of %d pieces", ErrIncomplete, n, dl.Parts)
	}
	if v, ok := values["body"]; ok {
		dl.Body = v
	}
	if v, ok := values["headers"]; ok {
		dl.Headers = string(v)
	}
	return nil
}
