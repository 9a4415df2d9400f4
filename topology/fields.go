package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
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
func decodeObject(body []byte, dst reflect.Value) error {
	if !utf8.Valid(body) {
		return errors.New("body is not valid UTF-8")
	}
	if k := kind(body); k != kindObject {
		return fmt.Errorf("body is %s, want a JSON object", k)
	}
	var obj map[string]json.RawMessage // checks the syntax of the whole body
	if err := json.Unmarshal(body, &obj); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	t := dst.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := jsonName(f)
		raw, ok := obj[name]
		if !ok {
			continue
		}
		if err := decodeValue(raw, dst.Field(i)); err != nil {
			return &FieldError{Field: name, Err: err}
		}
	}
	return nil
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
