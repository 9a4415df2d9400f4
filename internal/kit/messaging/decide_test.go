package messaging

import (
	"errors"
	"testing"

	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// The retry-versus-DLQ decision, without a broker: a failure is retried
// with the retry header one higher until the domain's maximum, then dead;
// a permanent one is dead at once; the copy keeps the message id, the
// priority and the trace id, and says why.
func TestRetryCopyDecidesRetryOrDLQ(t *testing.T) {
	t.Parallel()
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	dom, _ := tp.Domain(topology.DomainObjectReplication)
	d := Delivery{MessageID: "m-1", TraceID: "t-1", Priority: 10, Body: []byte(`{"taskId":1}`),
		Headers: map[string]string{"x-death": "[...]", "keep": "me"}}

	out, outcome := d.retryCopy(dom, errors.New("s3 down"))
	require.Equal(t, OutcomeRetried, outcome)
	require.Equal(t, dom.RetryKey, out.RoutingKey)
	require.Equal(t, "1", out.Headers[dom.RetryHeader])
	require.Equal(t, "s3 down", out.Headers[HeaderLastError])
	require.JSONEq(t, `{"taskId":1,"lastError":"s3 down"}`, string(out.Body))
	require.Equal(t, "me", out.Headers["keep"])
	require.Equal(t, "m-1", out.MessageID)
	require.EqualValues(t, 10, out.Priority)
	require.Equal(t, "t-1", out.TraceID)

	d.Retry = dom.Retry.MaxRetries
	out, outcome = d.retryCopy(dom, errors.New("s3 down"))
	require.Equal(t, OutcomeDead, outcome)
	require.Equal(t, dom.DLQKey, out.RoutingKey)
	require.Contains(t, out.Headers[HeaderDeadReason], "retries exhausted")

	d.Retry = 0
	out, outcome = d.retryCopy(dom, Permanent(errors.New("no such task")))
	require.Equal(t, OutcomeDead, outcome)
	require.Equal(t, "0", out.Headers[dom.RetryHeader], "the count is left as it was")
	require.Equal(t, "permanent: no such task", out.Headers[HeaderDeadReason])
}
