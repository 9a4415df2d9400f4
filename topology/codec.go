package topology

import (
	"errors"
	"fmt"
	"reflect"
)

// Message is one record of the wire contract: the 8 message types of this
// package. Their methods have value receivers, so a value and a pointer both
// implement Message.
type Message interface {
	// Validate reports the first field that breaks the contract, as a
	// *FieldError; nil when the record may be processed.
	Validate() error
	// Record is the Java record name, e.g. "EmailCodeDispatchMessage": the
	// Domain.Message of its domain.
	Record() string
	// Domain is the name of the domain it travels on, e.g. "email".
	Domain() string
}

// Decode reads one message body as Spring AMQP's Jackson converter publishes
// it and validates it:
//
//	m, err := topology.Decode[topology.PaymentNotify](delivery.Body)
//
// It binds like Jackson's defaults, with the bounds Isle adds:
//   - the body is a single JSON object in valid UTF-8: an array, a scalar,
//     trailing data or a truncated body is an error;
//   - keys match the json names exactly ("Amount" does not fill "amount"),
//     unknown keys are ignored, of duplicate keys the last wins;
//   - null leaves a field's zero value (nil for a Java Long or Integer);
//   - a number or boolean given for a String becomes its literal text; a
//     string holding an integer fills an integer ("" and "null" are null);
//     a fraction for an integer is refused where Jackson would truncate it;
//   - times in every form that OffsetDateTime and LocalDateTime describe.
//
// Every failure, of the body or of Validate, is a *DecodeError, and the
// zero T is returned with it.
func Decode[T any, PT interface {
	*T
	Message
}](body []byte) (T, error) {
	var v T
	p := PT(&v)
	rv := reflect.ValueOf(p).Elem()
	if rv.Kind() != reflect.Struct {
		return v, &DecodeError{Record: p.Record(), Err: fmt.Errorf("%s is not a struct", rv.Type())}
	}
	err := decodeObject(body, rv)
	if err == nil {
		err = p.Validate()
	}
	if err != nil {
		var zero T
		return zero, newDecodeError(p.Record(), err)
	}
	return v, nil
}

// Encode validates m and writes it as a Spring consumer's Jackson converter
// reads it: the Spring backend's camelCase names in the Spring backend's order, times in ISO-8601
// (see OffsetDateTime and LocalDateTime), an empty string as null (Java's
// null String), a nil pointer as null. Use it rather than json.Marshal, which
// writes "" for an empty string. A validation error wraps the *FieldError.
func Encode(m Message) ([]byte, error) {
	if isNil(m) {
		return nil, errors.New("topology: encode: nil message")
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("topology: encode %s: %w", m.Record(), err)
	}
	rv := reflect.Indirect(reflect.ValueOf(m))
	if rv.Kind() != reflect.Struct {
		return nil, fmt.Errorf("topology: encode %s: %s is not a struct", m.Record(), rv.Type())
	}
	body, err := encodeObject(rv)
	if err != nil {
		return nil, fmt.Errorf("topology: encode %s: %w", m.Record(), err)
	}
	return body, nil
}

// DomainOf returns the domain whose queues carry m's record.
func (t *Topology) DomainOf(m Message) (Domain, bool) {
	if isNil(m) {
		return Domain{}, false
	}
	if d := t.domainByMessage(m.Record()); d != nil {
		return *d, true
	}
	return Domain{}, false
}

// isNil reports a nil interface or a nil pointer in one, on which the value
// receivers of the records would panic.
func isNil(m Message) bool {
	if m == nil {
		return true
	}
	v := reflect.ValueOf(m)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
