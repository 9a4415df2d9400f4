package httpapi

import (
	"errors"
	"io"
	"net/http"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/store"
)

// Gateway callbacks (doc/payments.md): verified with internal/kit/paynotify,
// checked against the order, published as PaymentNotifyMessage, and
// answered only after the broker confirmed it. A callback that fails
// verification publishes nothing. The gateways resend what was not
// answered as done, so every refusal below is safe to repeat.

// notifyVerdict is what a verified (or refused) callback leads to.
type notifyVerdict int

const (
	notifyPublish notifyVerdict = iota // publish, then answer done
	notifyIgnore                       // answer done, publish nothing (not paid yet)
	notifyRefuse                       // answer a failure: the gateway resends
)

// judge decides a callback from its verification error and its order.
func (s *Server) judge(r *http.Request, n paynotify.Notice, verr error) (notifyVerdict, string) {
	switch {
	case errors.Is(verr, paynotify.ErrNotPaid) && recorded(n.TradeState):
		// Recorded by the consumer, never granted.
	case errors.Is(verr, paynotify.ErrNotPaid):
		return notifyIgnore, "not paid"
	case verr != nil:
		return notifyRefuse, verr.Error()
	}
	order, err := store.NewOrders(s.backends.DB, s.backends.Redis).Get(r.Context(), n.OutTradeNo)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notifyRefuse, "no order " + n.OutTradeNo
	case err != nil:
		return notifyRefuse, "order unavailable: " + err.Error()
	case order.Channel != n.Channel:
		return notifyRefuse, "order " + n.OutTradeNo + " was made for " + order.Channel
	case n.TradeState == paynotify.StateSuccess && !paynotify.AmountMatches(n, order.AmountFen):
		return notifyRefuse, "amount differs from the order's"
	}
	return notifyPublish, ""
}

// recorded says whether a trade state that is not paid is published for
// the consumer to record: a closed (or revoked) trade closes its order, a
// refund marks a paid one. The states of a trade in progress need nothing.
func recorded(state string) bool {
	switch state {
	case paynotify.StateClosed, paynotify.StateRevoked, paynotify.StateRefund:
		return true
	}
	return false
}

// publishNotice publishes n, its message id the callback's identity, so
// the consumer can tell a resent callback by it.
func (s *Server) publishNotice(r *http.Request, n paynotify.Notice) error {
	return s.Publish(r, n.Message(), messaging.Options{MessageID: "notify:" + n.Channel + ":" + n.NotifyID})
}

// alipayNotify answers Alipay's asynchronous notification: "success" once
// it is published (or needs nothing), "fail" otherwise, so Alipay resends.
func (s *Server) alipayNotify(w http.ResponseWriter, r *http.Request) error {
	answer := func(ok bool) error {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ok {
			_, err := io.WriteString(w, "success")
			return err
		}
		w.WriteHeader(http.StatusBadRequest)
		_, err := io.WriteString(w, "fail")
		return err
	}
	if s.backends.Alipay == nil {
		s.backends.Log.ErrorContext(r.Context(), "an Alipay callback came and Alipay is not configured (PAYMENT_ALIPAY_*)")
		return answer(false)
	}
	if err := r.ParseForm(); err != nil {
		s.backends.Log.WarnContext(r.Context(), "Alipay callback refused", "reason", err)
		return answer(false)
	}
	an, verr := s.backends.Alipay.VerifyAlipay(r.PostForm)
	n := an.Notice()
	verdict, why := s.judge(r, n, verr)
	switch verdict {
	case notifyIgnore:
		return answer(true)
	case notifyRefuse:
		s.backends.Log.WarnContext(r.Context(), "Alipay callback refused", "out_trade_no", n.OutTradeNo, "reason", why)
		return answer(false)
	}
	if err := s.publishNotice(r, n); err != nil {
		s.backends.Log.WarnContext(r.Context(), "Alipay callback not published; Alipay will resend", "out_trade_no", n.OutTradeNo, "err", err)
		return answer(false)
	}
	return answer(true)
}

// wechatNotify answers WeChat Pay's API v3 notification: 204 once it is
// published (or needs nothing); otherwise a 4xx or 5xx with WeChat's error
// body, and WeChat resends. The body is read once, raw, before anything
// decodes it: the signature is over those bytes.
func (s *Server) wechatNotify(w http.ResponseWriter, r *http.Request) error {
	fail := func(status int, msg string) error {
		writeJSON(w, status, map[string]string{"code": "FAIL", "message": msg})
		return nil
	}
	if s.backends.Wechat == nil {
		s.backends.Log.ErrorContext(r.Context(), "a WeChat Pay callback came and WeChat Pay is not configured (PAYMENT_WECHAT_*)")
		return fail(http.StatusServiceUnavailable, "not configured")
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return fail(http.StatusRequestEntityTooLarge, "body too large or unreadable")
	}
	wn, verr := s.backends.Wechat.VerifyWechat(r.Header, raw, s.now())
	n := wn.Notice()
	verdict, why := s.judge(r, n, verr)
	switch verdict {
	case notifyIgnore:
		w.WriteHeader(http.StatusNoContent)
		return nil
	case notifyRefuse:
		s.backends.Log.WarnContext(r.Context(), "WeChat Pay callback refused", "out_trade_no", n.OutTradeNo, "reason", why)
		switch {
		case errors.Is(verr, paynotify.ErrDecrypt):
			return fail(http.StatusInternalServerError, "cannot decrypt")
		case errors.Is(verr, paynotify.ErrBadSignature), errors.Is(verr, paynotify.ErrUnknownSerial), errors.Is(verr, paynotify.ErrStale):
			return fail(http.StatusUnauthorized, "signature not verified")
		}
		return fail(http.StatusBadRequest, "refused")
	}
	if err := s.publishNotice(r, n); err != nil {
		s.backends.Log.WarnContext(r.Context(), "WeChat Pay callback not published; WeChat will resend", "out_trade_no", n.OutTradeNo, "err", err)
		return fail(http.StatusServiceUnavailable, "try again")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
