package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/eisland/isle/store"
)

// DecodeJSON reads a request body that must be one JSON object into v.
// Unknown fields are ignored; a wrong type or malformed JSON is a 400 that
// names the field, a body over the route's limit a 413, a content type other
// than JSON a 415.
func DecodeJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return Errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "content type %q: send application/json", ct)
		}
	}
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		switch {
		case errors.As(err, &tooLarge):
			return err
		case errors.Is(err, io.EOF):
			return BadRequest("empty body: send a JSON object")
		case errors.As(err, &typeErr):
			return BadRequest("field %s: want %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value)
		case errors.As(err, &syntaxErr):
			return BadRequest("malformed JSON at byte %d: %v", syntaxErr.Offset, err)
		default:
			return BadRequest("malformed JSON: %v", err)
		}
	}
	if dec.More() {
		return BadRequest("trailing data after the JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return BadRequest("trailing data after the JSON object")
	}
	return nil
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
