package console

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/eisland/isle/store"
)

// outboxData is the outbox page: the rows the relay parked.
type outboxData struct {
	Rows   []store.ParkedRow
	Counts map[string]int
	Tables []string
	Shown  int // the most rows of each table listed
}

// parkedShown is how many parked rows of each table the page lists.
const parkedShown = 200

// outbox lists the parked outbox rows: rows the relay cannot publish as
// they are (doc/outbox.md), with why.
func (c *Console) outbox(w http.ResponseWriter, r *http.Request) (rendered, error) {
	rows, counts, err := store.ParkedOutbox(r.Context(), c.backends.DB, parkedShown)
	if err != nil {
		return rendered{}, err
	}
	return rendered{file: "outbox.html", title: "Outbox", nav: "outbox",
		data: outboxData{Rows: rows, Counts: counts, Tables: store.OutboxTables, Shown: parkedShown}}, nil
}

// unparkedData is the page after a replay of parked rows.
type unparkedData struct {
	Table     string
	Asked     int // rows selected; 0 with All
	All       bool
	Unparked  int
	Operator  string
	NotParked int
}

// replayOutbox makes parked rows of one table due again (the selected
// "id"s, or every one with "all"): the relay publishes them, or parks again
// those still unpublishable.
func (c *Console) replayOutbox(w http.ResponseWriter, r *http.Request) (rendered, error) {
	table := r.PostForm.Get("table")
	if !slices.Contains(store.OutboxTables, table) {
		return rendered{}, errorf(http.StatusBadRequest, "%q is not an outbox table", table)
	}
	var ids []uint64
	for _, s := range r.PostForm["id"] {
		id, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return rendered{}, errorf(http.StatusBadRequest, "%q is not a row id", s)
		}
		ids = append(ids, id)
	}
	all := r.PostForm.Get("all") != ""
	if len(ids) == 0 && !all {
		return rendered{}, errorf(http.StatusBadRequest, "no row selected")
	}
	if all {
		ids = nil
	}
	who := c.backends.Operator(r)
	n, err := store.UnparkOutbox(r.Context(), c.backends.DB, table, ids)
	if err != nil {
		return rendered{}, err
	}
	c.backends.Log.InfoContext(r.Context(), "console: outbox rows replayed", "operator", who, "table", table,
		"ids", fmt.Sprint(ids), "all", all, "unparked", n)
	d := unparkedData{Table: table, Asked: len(ids), All: all, Unparked: n, Operator: who}
	if !all {
		d.NotParked = len(ids) - n
	}
	return rendered{file: "unparked.html", title: "Outbox replay", nav: "outbox", data: d}, nil
}
