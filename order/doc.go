// Package order holds the payment order's rules (doc/payments.md): the
// products, channels and statuses, what a new order must be and how long
// it can be paid (order.go), and the state machine a gateway's
// notification drives, with what each transition grants (notify.go).
//
// The rules are plain Go: no SQL, no Redis, no clock of their own (the
// caller passes now). store persists the transitions they decide, in the
// transaction that locks the order's row; internal/service/httpapi creates orders
// and handlers apply notifications through store, and both read the
// outcomes and errors from here. order imports nothing of Isle but the
// contract (e2e/imports_test.go), and its tests need no service.
package order
