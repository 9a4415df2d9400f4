package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/go-chi/chi/v5"
)

// orderMaxBody bounds an order request: one small JSON record.
const orderMaxBody = 4 << 10

type orderRequest struct {
	Product      string `json:"product"`
	AmountFen    int64  `json:"amountFen"`
	Channel      string `json:"channel"`
	ReceiptEmail string `json:"receiptEmail"`
}

// orderAnswer is an order as the API shows it.
type orderAnswer struct {
	OutTradeNo   string     `json:"outTradeNo"`
	Username     string     `json:"username"`
	Product      string     `json:"product"`
	AmountFen    int64      `json:"amountFen"`
	Currency     string     `json:"currency"`
	Channel      string     `json:"channel"`
	Status       string     `json:"status"`
	ReceiptEmail *string    `json:"receiptEmail"`
	ExpireAt     time.Time  `json:"expireAt"`
	PaidAt       *time.Time `json:"paidAt"`
	CreatedAt    time.Time  `json:"createdAt"`
}

func answerOrder(o store.PaymentOrder) orderAnswer {
	return orderAnswer{OutTradeNo: o.OutTradeNo, Username: o.Username, Product: o.ProductCode, AmountFen: o.AmountFen, Currency: o.Currency,
		Channel: o.Channel, Status: o.Status, ReceiptEmail: o.ReceiptEmail, ExpireAt: o.ExpireAt, PaidAt: o.PaidAt, CreatedAt: o.CreatedAt}
}

// createOrder creates a PENDING payment order for the caller (doc/payments.md):
// 201 with the order; 400 for an unknown product or channel, a wrong
// amount or a bad receipt address (order.New.Check); 409 while the caller has an unexpired
// PENDING order (details name it) or while another creation of the same
// product for the caller holds the lock.
func (s *Server) createOrder(w http.ResponseWriter, r *http.Request) error {
	var req orderRequest
	if err := DecodeJSON(r, &req); err != nil {
		return err
	}
	if req.ReceiptEmail != "" {
		if err := mail.ValidAddress(req.ReceiptEmail); err != nil {
			return BadRequest("receiptEmail: %v", err)
		}
	}
	p, _ := PrincipalFrom(r.Context())
	o, err := store.NewOrders(s.backends.DB, s.backends.Redis).Create(r.Context(), order.New{Username: p.Subject, Product: req.Product,
		AmountFen: req.AmountFen, Channel: req.Channel, ReceiptEmail: req.ReceiptEmail})
	var active *store.ErrActiveOrder
	switch {
	case errors.As(err, &active):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "an order is already waiting to be paid",
			Details: map[string]any{"outTradeNo": active.OutTradeNo, "expireAt": active.ExpireAt}}
	case errors.Is(err, store.ErrOrderLocked):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "an order is being created; try again shortly",
			RetryAfter: time.Second}
	case errors.Is(err, order.ErrInvalid):
		return BadRequest("%s", invalidReason(err))
	case err != nil && o.OutTradeNo != "":
		// The order exists; only its Redis keys are missing, and MySQL
		// still enforces one active order.
		s.backends.Log.WarnContext(r.Context(), "order created without its lifecycle keys", "outTradeNo", o.OutTradeNo, "err", err)
	case err != nil:
		return Unavailable("payment orders", err)
	}
	return JSON(w, http.StatusCreated, answerOrder(o))
}

// invalidReason is the part of an order.ErrInvalid error after the
// sentinel's text.
func invalidReason(err error) string {
	return strings.TrimPrefix(err.Error(), order.ErrInvalid.Error()+": ")
}

// getOrder answers an order to its owner and to admins; to anyone else it
// does not exist.
func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) error {
	no := chi.URLParam(r, "outTradeNo")
	o, err := store.NewOrders(s.backends.DB, s.backends.Redis).Get(r.Context(), no)
	p, _ := PrincipalFrom(r.Context())
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && o.Username != p.Subject && p.Role != RoleAdmin:
		return Errorf(http.StatusNotFound, CodeNotFound, "no order %q", no)
	case err != nil:
		return Unavailable("payment orders", err)
	}
	return JSON(w, http.StatusOK, answerOrder(o))
}
