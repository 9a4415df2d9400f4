package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/service/dlq"
	"github.com/eisland/isle/store"
	"github.com/stretchr/testify/require"
)

// dlq show prints the stored message as it was stored: every byte of a 70 KB
// header, the digits of a number too large for a float64, the sizes.
func TestShowPrintsTheStoredMessageAsStored(t *testing.T) {
	t.Parallel()
	value := strings.Repeat("0123456789abcdef", 70_000/16+1)[:70_000]
	headers := `{"x-big":"` + value + `","x-email-retry-count":3}`
	body := `{"taskId":12345678901234567890,"email":"u@example.com"}`
	e := dlq.Entry{Ref: dlq.Ref{Domain: "email", ID: 12}, DeadLetter: store.DeadLetter{
		Queue: "q.dlq", Body: []byte(body), Headers: headers, BodyBytes: int64(len(body)),
		HeadersBytes: int64(len(headers)), DeadAt: time.Unix(0, 0),
	}}
	var out bytes.Buffer
	require.NoError(t, printEntry(&out, e))
	s := out.String()
	require.Contains(t, s, `"x-big": "`+value+`"`)
	require.Contains(t, s, `"x-email-retry-count": 3`)
	require.Contains(t, s, `"taskId": 12345678901234567890`)
	require.Contains(t, s, "headers (70036 bytes):")
	require.Contains(t, s, "body (55 bytes):")
}

// dlq list shows each message's body size, read from the row's sizes.
func TestListPrintsBodySizes(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	printEntries(&out, []dlq.Entry{{Ref: dlq.Ref{Domain: "email", ID: 3}, DeadLetter: store.DeadLetter{BodyBytes: 17_000_136, RetryCount: 3}}})
	require.Regexp(t, `email/3\s+\S+\s+3\s+17000136\s`, out.String())
}
