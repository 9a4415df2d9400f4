package topology

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// decodeObjectByMap is decodeObject as it was before its one-pass reader:
// the body into a map of raw values, then each field from the map. The
// fuzz target below holds the two to the same answers.
func decodeObjectByMap(body []byte, dst reflect.Value) error {
	if err := decodeObjectPrelude(body); err != nil {
		return err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return err
	}
	t := dst.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		raw, ok := obj[jsonName(f)]
		if !ok {
			continue
		}
		if err := decodeValue(raw, dst.Field(i)); err != nil {
			return &FieldError{Field: jsonName(f), Err: err}
		}
	}
	return nil
}

// decodeObjectPrelude is the part of decodeObject both ways share: UTF-8,
// an object, valid JSON.
func decodeObjectPrelude(body []byte) error {
	var empty struct{}
	err := decodeObject(body, reflect.ValueOf(&empty).Elem())
	return err
}

func FuzzDecodeObjectAsByAMap(f *testing.F) {
	for _, s := range []string{
		`{"username":"alice","amountFen":"1.5","deductionId":"d1","inputTokens":3}`,
		`{"username":"a","username":"b","inputTokens":null}`,
		`{"user\u006eame":"esc","modelName":"m\"q\\\\","outputTokens":"7"}`,
		` { "username" : "sp" , "x" : { "y" : [ 1 , "}" , { } ] } , "inputTokens" : 2 } `,
		`{"inputTokens":"x"}`, `{"inputTokens":1,"inputTokens":"bad"}`, `{"inputTokens":"bad","inputTokens":1}`,
		`{"username":"\ud800"}`, `{"username":"é\u00e9"}`, `{"a":1}{}`, `{"a":`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got, want AgentBillingDeduct
		err := decodeObject(body, reflect.ValueOf(&got).Elem())
		refErr := decodeObjectByMap(body, reflect.ValueOf(&want).Elem())
		require.Equal(t, refErr == nil, err == nil, "errors: %v, by a map %v", err, refErr)
		var fe, refFe *FieldError
		require.Equal(t, errors.As(refErr, &refFe), errors.As(err, &fe), "a field's error: %v, by a map %v", err, refErr)
		if fe != nil {
			require.Equal(t, refFe.Field, fe.Field)
		}
		if err == nil {
			require.Equal(t, want, got)
		}
	})
}

// A deduction as the API publishes it, decoded in one pass and by a map.
func BenchmarkDecodeObject(b *testing.B) {
	body := []byte(`{"deductionId":"req-000123","username":"user-0042","amountFen":"1.23456789","modelName":"gpt-test",` +
		`"inputTokens":1200,"outputTokens":350,"pendingRef":"p-1733212345678","requestHash":"9f86d081884c7d659a2feaa0c55ad015"}`)
	for _, way := range []struct {
		name   string
		decode func([]byte, reflect.Value) error
	}{{"one-pass", decodeObject}, {"map", decodeObjectByMap}} {
		b.Run(way.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var m AgentBillingDeduct
				if err := way.decode(body, reflect.ValueOf(&m).Elem()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
