package messaging

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/shopspring/decimal"
)

// Header names Isle reads or writes besides the domains' retry headers.
const (
	HeaderTypeID     = "__TypeId__"    // Java class of the body (Spring AMQP's Jackson converter)
	HeaderTraceID    = "x-trace-id"    // correlation id of the request that caused the message
	HeaderLastError  = "x-last-error"  // why the previous attempt failed
	HeaderDeadReason = "x-dead-reason" // why a message went to its DLQ
	HeaderReplay     = "x-replay-count"
)

// Metadata keys that carry AMQP properties rather than headers. They are
// never written as headers.
const (
	metaPrefix      = "_amqp."
	metaPriority    = metaPrefix + "priority"
	metaRoutingKey  = metaPrefix + "routing_key"
	metaHeadersJSON = metaPrefix + "headers_json"
	metaCorrelation = metaPrefix + "correlation_id"
)

// deathHeader reports whether a header was added by the broker's
// dead-lettering; copies must not carry them, or a retry cycle without a
// rejection in it looks like a loop to the broker, which drops it.
func deathHeader(k string) bool {
	return k == "x-death" || strings.HasPrefix(k, "x-first-death-") || strings.HasPrefix(k, "x-last-death-")
}

// watermillHeader reports whether a header is watermill's own bookkeeping
// (a watermill producer's _watermill_message_uuid): it describes the
// original publish, not a copy, which gets a message_id of its own.
func watermillHeader(k string) bool {
	return strings.HasPrefix(k, "_watermill")
}

// HeaderText renders any AMQP header value as text, as the Subscriber does
// for a message's metadata: for a watermill message built from an AMQP
// delivery elsewhere (the worker's watermill-amqp marshaler).
func HeaderText(v any) string { return headerString(v) }

// MetadataCorrelationID is the metadata key that carries the AMQP
// correlation id of a message (a trace id when no x-trace-id header does).
const MetadataCorrelationID = metaCorrelation

// headerString renders any AMQP field value as text. It never fails: a value
// it does not know is printed with %v.
func headerString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case bool:
		return strconv.FormatBool(x)
	case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case amqp.Decimal:
		return decimal.New(int64(x.Value), -int32(x.Scale)).String()
	case amqp.Table, []any:
		b, err := json.Marshal(jsonable(x))
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	default:
		return fmt.Sprint(x)
	}
}

// jsonable converts an AMQP value into something encoding/json accepts
// (tables and arrays nest; decimals and timestamps become text).
func jsonable(v any) any {
	switch x := v.(type) {
	case amqp.Table:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = jsonable(e)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonable(e)
		}
		return out
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return headerString(x)
		}
		return x
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return headerString(x)
		}
		return x
	case time.Time, amqp.Decimal, []byte:
		return headerString(x)
	default:
		return x
	}
}

// MaxRetryHeader bounds a parsed retry count: anything larger is clamped.
const MaxRetryHeader = 1 << 20

// ParseRetry reads a retry-count header defensively: missing, empty,
// negative or non-numeric values count as 0, and huge ones are clamped.
func ParseRetry(s string) int {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsNaN(f) {
			return 0
		}
		if f > MaxRetryHeader {
			return MaxRetryHeader
		}
		n = int64(f)
	}
	switch {
	case n < 0:
		return 0
	case n > MaxRetryHeader:
		return MaxRetryHeader
	}
	return int(n)
}
