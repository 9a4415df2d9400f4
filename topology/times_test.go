package topology_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

func TestOffsetDateTimeDecodes(t *testing.T) {
	t.Parallel()
	ist := time.FixedZone("", 5*3600+1800)
	for in, want := range map[string]time.Time{
		`1764417662.123456789`:            time.Date(2025, 11, 29, 12, 1, 2, 123456789, time.UTC),
		`1764417662.1234567899`:           time.Date(2025, 11, 29, 12, 1, 2, 123456789, time.UTC), // truncated
		`1764417662`:                      time.Date(2025, 11, 29, 12, 1, 2, 0, time.UTC),
		`1.7644176625E9`:                  time.Date(2025, 11, 29, 12, 1, 2, 5e8, time.UTC),
		`"1764417662.5"`:                  time.Date(2025, 11, 29, 12, 1, 2, 5e8, time.UTC),
		`"1764417662"`:                    time.Date(2025, 11, 29, 12, 1, 2, 0, time.UTC),
		`-1.5`:                            time.Date(1969, 12, 31, 23, 59, 58, 5e8, time.UTC),
		`"2025-11-29T20:01:02.5+08:00"`:   time.Date(2025, 11, 29, 20, 1, 2, 5e8, topology.UTC8),
		`"2025-11-29T12:01:02Z"`:          time.Date(2025, 11, 29, 12, 1, 2, 0, time.UTC),
		`"2025-11-29T20:01:02"`:           time.Date(2025, 11, 29, 20, 1, 2, 0, topology.UTC8),
		`"2025-11-29T17:31+05:30"`:        time.Date(2025, 11, 29, 17, 31, 0, 0, ist),
		`null`:                            {},
		`""`:                              {},
		`"9999-12-31T23:59:59.999+08:00"`: time.Date(9999, 12, 31, 23, 59, 59, 999e6, topology.UTC8),
	} {
		var got topology.OffsetDateTime
		require.NoError(t, json.Unmarshal([]byte(in), &got), in)
		require.True(t, want.Equal(got.Time), "%s: got %s", in, got)
		_, wantOff := want.Zone()
		_, gotOff := got.Zone()
		require.Equal(t, wantOff, gotOff, in)
	}
}

func TestOffsetDateTimeRefuses(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`"NaN"`, `"Infinity"`, `"-Infinity"`, `1e300`, `1e999999999`, `1e-999999999`, `-1e20`, `253402300800`,
		`-62135596800`, `"0001-01-01T00:00:00Z"`, `"0000-12-31T23:59:59Z"`, `"2025-13-01T00:00:00Z"`,
		`"2025-02-29T00:00:00Z"`, `"2025-11-29T24:00:00Z"`, `"2025-11-29T20:01:02+19:00"`, `"2025-11-29"`,
		`"tomorrow"`, `"1764417662e3"`, `true`, `[1764417662]`, `{}`, `nul`,
	} {
		var got topology.OffsetDateTime
		require.Error(t, got.UnmarshalJSON([]byte(in)), in)
	}
}

func TestLocalDateTimeDecodes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Time{
		`[2026,11,29,20,1]`:               time.Date(2026, 11, 29, 20, 1, 0, 0, topology.UTC8),
		`[2026,11,29,20,1,2]`:             time.Date(2026, 11, 29, 20, 1, 2, 0, topology.UTC8),
		`[2026,11,29,20,31,2,500000000]`:  time.Date(2026, 11, 29, 20, 31, 2, 5e8, topology.UTC8),
		`[ 2024 , 2 , 29 , 0 , 0 ]`:       time.Date(2024, 2, 29, 0, 0, 0, 0, topology.UTC8),
		`"2026-11-29T20:01:02"`:           time.Date(2026, 11, 29, 20, 1, 2, 0, topology.UTC8),
		`"2026-11-29T20:01:02.000000001"`: time.Date(2026, 11, 29, 20, 1, 2, 1, topology.UTC8),
		`"2026-11-29T20:01"`:              time.Date(2026, 11, 29, 20, 1, 0, 0, topology.UTC8),
		`"2026-11-29T12:01:02Z"`:          time.Date(2026, 11, 29, 20, 1, 2, 0, topology.UTC8),
		`"2026-11-29T06:01:02.25-06:00"`:  time.Date(2026, 11, 29, 20, 1, 2, 25e7, topology.UTC8),
		`[]`:                              {},
		`null`:                            {},
		`""`:                              {},
	} {
		var got topology.LocalDateTime
		require.NoError(t, json.Unmarshal([]byte(in), &got), in)
		require.Equal(t, want, got.Time, in) // UTC+8 is the very same *time.Location
	}
}

func TestLocalDateTimeRefuses(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`[2026,13,1,0,0]`, `[2026,0,1,0,0]`, `[2026,2,29,0,0]`, `[2024,2,30,0,0]`, `[2026,4,31,0,0]`,
		`[2026,1,1,24,0]`, `[2026,1,1,0,60]`, `[2026,1,1,0,0,60]`, `[2026,1,1,0,0,0,1000000000]`,
		`[2026,1,1,0,0,0,-1]`, `[2026,1,1]`, `[2026,1,1,0,0,0,0,0]`, `[2026.0,1,1,0,0]`, `["2026",1,1,0,0]`,
		`[0,1,1,0,0]`, `[10000,1,1,0,0]`, `[2147483648,1,1,0,0]`, `[1,1,1,0,0]`, `[[2026],1,1,0,0]`,
		`1764417662`, `true`, `{}`, `"2026-11-29"`, `"2026-11-29 20:01:02"`, `"10000-01-01T00:00:00"`, `"9999-12-31T23:59:59Z"`, `[2026,1,1,0,0`,
	} {
		var got topology.LocalDateTime
		require.Error(t, got.UnmarshalJSON([]byte(in)), in)
	}
}

func TestTimesEncode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   json.Marshaler
		want string
	}{
		{topology.OffsetDateTime{}, `null`},
		{topology.OffsetDateTime{Time: time.Date(2026, 11, 29, 20, 1, 2, 5e8, topology.UTC8)}, `"2026-11-29T20:01:02.5+08:00"`},
		{topology.OffsetDateTime{Time: time.Date(2026, 11, 29, 12, 1, 2, 0, time.UTC)}, `"2026-11-29T12:01:02Z"`},
		{topology.OffsetDateTime{Time: time.Date(2026, 11, 29, 0, 0, 0, 0, time.FixedZone("", -3*3600))}, `"2026-11-29T00:00:00-03:00"`},
		{topology.OffsetDateTime{Time: time.Date(2026, 11, 29, 0, 0, 30, 0, time.FixedZone("LMT", 30))}, `"2026-11-29T00:00:00Z"`},
		{topology.LocalDateTime{}, `null`},
		{topology.LocalDateTime{Time: time.Date(2026, 11, 29, 12, 1, 2, 0, time.UTC)}, `"2026-11-29T20:01:02"`},
		{topology.LocalDateTime{Time: time.Date(2026, 11, 29, 20, 1, 2, 123e6, topology.UTC8)}, `"2026-11-29T20:01:02.123"`},
	} {
		got, err := tc.in.MarshalJSON()
		require.NoError(t, err, tc.want)
		require.Equal(t, tc.want, string(got))
	}
	_, err := topology.LocalDateTime{Time: time.Date(9999, 12, 31, 20, 0, 0, 0, time.UTC)}.MarshalJSON()
	require.Error(t, err, "year 10000 in UTC+8")
	_, err = topology.OffsetDateTime{Time: time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC)}.MarshalJSON()
	require.Error(t, err)
}
