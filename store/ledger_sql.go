package store

import (
	"database/sql"
	"strings"

	"gorm.io/gorm"
)

// The ledger's hot statements — the locking reads, the multi-row INSERT
// and the balance UPDATE of every deduction batch — are written here as
// SQL and run on the connection of the gorm handle they are given
// (tx.Statement.ConnPool: the transaction's, or a pinned connection's),
// past gorm's statement building. gorm builds a statement by reflection,
// a clause and a boxed value at a time, which cost more than the rows it
// wrote (measured under the bench's end-to-end load: the largest allocator
// of the worker). What gorm would add — soft deletes, hooks, timestamps — the
// tables of the ledger do not use.

// execSQL runs q with args on tx's connection.
func execSQL(tx *gorm.DB, q string, args ...any) (sql.Result, error) {
	return tx.Statement.ConnPool.ExecContext(tx.Statement.Context, q, args...)
}

// querySQL runs q with args on tx's connection; close the rows.
func querySQL(tx *gorm.DB, q string, args ...any) (*sql.Rows, error) {
	return tx.Statement.ConnPool.QueryContext(tx.Statement.Context, q, args...)
}

// placeholders writes n comma-separated "?" to b.
func placeholders(b *strings.Builder, n int) {
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('?')
	}
}

// inStrings is head, then "(?, ?, ...)" for vals, then tail, and vals as
// the statement's arguments: a locking read of the rows of many keys.
func inStrings(head string, vals []string, tail string) (string, []any) {
	var b strings.Builder
	b.WriteString(head)
	b.WriteByte('(')
	placeholders(&b, len(vals))
	b.WriteByte(')')
	b.WriteString(tail)
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = v
	}
	return b.String(), args
}

// ledgerColumns are the columns of agent_ledger in LedgerEntry's order,
// as scanLedgerEntries reads them.
const ledgerColumns = "id, username, kind, entry_id, pending_ref, request_hash, seq, amount_fen, shortfall_fen, model_name, " +
	"input_tokens, output_tokens, reason, source, occurred_at, settled_at, created_at"

// scanLedgerEntries reads rows of ledgerColumns, and closes them.
func scanLedgerEntries(rows *sql.Rows) ([]LedgerEntry, error) {
	defer rows.Close()
	var out []LedgerEntry
	for rows.Next() {
		var e LedgerEntry
		if err := rows.Scan(&e.ID, &e.Username, &e.Kind, &e.EntryID, &e.PendingRef, &e.RequestHash, &e.Seq, &e.AmountFen, &e.ShortfallFen,
			&e.ModelName, &e.InputTokens, &e.OutputTokens, &e.Reason, &e.Source, &e.OccurredAt, &e.SettledAt, &e.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// ledgerInsertColumns are the columns insertLedgerRows writes: all but the
// ones MySQL fills (id, created_at).
const ledgerInsertColumns = "username, kind, entry_id, pending_ref, request_hash, seq, amount_fen, shortfall_fen, model_name, " +
	"input_tokens, output_tokens, reason, source, occurred_at, settled_at"

// ledgerInsertArgs is how many values a row of insertLedgerRows takes.
const ledgerInsertArgs = 15

// insertLedgerRows writes rows to agent_ledger in one statement, as gorm's
// Create of them with id and created_at omitted would.
func insertLedgerRows(tx *gorm.DB, rows []LedgerEntry) error {
	if len(rows) == 0 {
		return nil
	}
	var b strings.Builder
	b.Grow(len("INSERT INTO agent_ledger () VALUES ") + len(ledgerInsertColumns) + len(rows)*(4*ledgerInsertArgs))
	b.WriteString("INSERT INTO agent_ledger (" + ledgerInsertColumns + ") VALUES ")
	args := make([]any, 0, ledgerInsertArgs*len(rows))
	for i := range rows {
		r := &rows[i]
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		placeholders(&b, ledgerInsertArgs)
		b.WriteByte(')')
		args = append(args, r.Username, r.Kind, r.EntryID, r.PendingRef, r.RequestHash, r.Seq, r.AmountFen, r.ShortfallFen, r.ModelName,
			r.InputTokens, r.OutputTokens, r.Reason, r.Source, r.OccurredAt, r.SettledAt)
	}
	_, err := execSQL(tx, b.String(), args...)
	return err
}
