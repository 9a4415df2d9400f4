package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"
)

// The records are bound field by field, by reflection over their json tags,
// because encoding/json matches keys case-insensitively and coerces nothing,
// while Jackson matches exactly and coerces scalars.

// jsonName is a field's name on the wire: the name in its json tag.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

// decodeObject fills the struct dst from body the way Jackson binds a record:
// body must be one JSON object in valid UTF-8; keys match field names
// exactly; unknown keys are skipped; of duplicate keys the last wins; null
// leaves a field's zero value. A field that cannot be bound is a *FieldError.
//
// It reads the object's members in one pass over the checked body, keeping
// the last value of each known field, rather than build a map of every key:
// the consumers decode every message they take, and the map, its keys and a
// copy of each value were most of what a decode allocated.
func decodeObject(body []byte, dst reflect.Value) error {
	if !utf8.Valid(body) {
		return errors.New("body is not valid UTF-8")
	}
	if k := kind(body); k != kindObject {
		return fmt.Errorf("body is %s, want a JSON object", k)
	}
	if !json.Valid(body) {
		var obj map[string]json.RawMessage // for encoding/json's own account of the error
		if err := json.Unmarshal(body, &obj); err != nil {
			return fmt.Errorf("body: %w", err)
		}
		return errors.New("body: invalid JSON")
	}
	fields := wireFieldsOf(dst.Type())
	var last [maxWireFields][]byte // the value of each field's last member
	if err := eachMember(body, func(key, value []byte) error {
		for i := range fields {
			if string(key) == fields[i].name {
				last[i] = value
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	for i, f := range fields {
		if last[i] == nil {
			continue
		}
		if err := decodeValue(last[i], dst.Field(f.index)); err != nil {
			return &FieldError{Field: f.name, Err: err}
		}
	}
	return nil
}

// maxWireFields bounds the fields of a record (the largest has 12); a
// record with more panics in wireFieldsOf, at its first decode in a test.
const maxWireFields = 32

// wireField is an exported field of a record and its name on the wire.
type wireField struct {
	name  string
	index int
}

var wireFields sync.Map // reflect.Type -> []wireField

// wireFieldsOf lists the exported fields of the struct type t, made once
// per type.
func wireFieldsOf(t reflect.Type) []wireField {
	if fs, ok := wireFields.Load(t); ok {
		return fs.([]wireField)
	}
	var fs []wireField
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() {
			fs = append(fs, wireField{name: jsonName(f), index: i})
		}
	}
	if len(fs) > maxWireFields {
		panic(fmt.Sprintf("topology: %s has %d fields, more than %d", t, len(fs), maxWireFields))
	}
	wireFields.Store(t, fs)
	return fs
}

// eachMember calls fn with the key (unquoted) and the raw value of each
// member of the JSON object body, in order. body must be valid JSON
// (json.Valid) holding one object.
func eachMember(body []byte, fn func(key, value []byte) error) error {
	i := skipSpace(body, 0) + 1 // past '{'
	for {
		i = skipSpace(body, i)
		if body[i] == '}' {
			return nil
		}
		end := stringEnd(body, i)
		key := body[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			k, err := unquote(body[i:end])
			if err != nil {
				return err
			}
			key = []byte(k)
		}
		i = skipSpace(body, end) + 1 // past ':'
		i = skipSpace(body, i)
		vend := valueEnd(body, i)
		if err := fn(key, body[i:vend]); err != nil {
			return err
		}
		i = skipSpace(body, vend)
		if body[i] == ',' {
			i++
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// stringEnd is the index just past the JSON string that begins at b[i].
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd is the index just past the JSON value that begins at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\r' && b[j] != '\n' {
		j++
	}
	return j
}

func decodeValue(raw []byte, v reflect.Value) error {
	if u, ok := v.Addr().Interface().(json.Unmarshaler); ok {
		return u.UnmarshalJSON(raw)
	}
	switch v.Kind() {
	case reflect.String:
		s, err := decodeString(raw)
		v.SetString(s)
		return err
	case reflect.Bool:
		b, err := decodeBool(raw)
		v.SetBool(b)
		return err
	case reflect.Int32, reflect.Int64:
		n, _, err := decodeInt(raw, v.Type().Bits())
		v.SetInt(n)
		return err
	case reflect.Pointer:
		if e := v.Type().Elem(); e.Kind() == reflect.Int32 || e.Kind() == reflect.Int64 {
			n, null, err := decodeInt(raw, e.Bits())
			if err != nil || null {
				return err
			}
			p := reflect.New(e)
			p.Elem().SetInt(n)
			v.Set(p)
			return nil
		}
	}
	return fmt.Errorf("unsupported Go type %s", v.Type())
}

// encodeObject writes the struct src with its fields in declaration order
// (the Spring backend's order), as Jackson writes a record: an empty string is null,
// which is how Java sees a missing String; HTML characters are not escaped.
func encodeObject(src reflect.Value) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	put := func(v any) error {
		if err := enc.Encode(v); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1) // the newline Encode appends
		return nil
	}
	buf.WriteByte('{')
	t := src.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		name := jsonName(f)
		if err := put(name); err != nil {
			return nil, err
		}
		buf.WriteByte(':')
		if v := src.Field(i); v.Kind() == reflect.String && v.Len() == 0 {
			buf.WriteString("null")
		} else if err := put(v.Interface()); err != nil {
			return nil, &FieldError{Field: name, Err: err}
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
