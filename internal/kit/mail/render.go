package mail

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// utc8 is the zone receipts show times in, the eIsland backend's (UTC+8, no
// daylight saving).
var utc8 = time.FixedZone("UTC+8", 8*60*60)

// Code is a verification code mail (EmailCodeDispatchMessage).
type Code struct {
	Scene string        // REGISTER, LOGIN, RESET_PASSWORD, CHANGE_EMAIL, UNREGISTER
	Code  string        // six ASCII digits
	Email string        // the recipient, named in the mail
	TTL   time.Duration // how long the code stays valid; shown in whole minutes, at least 1
	Lang  string        // LangZH, LangEN; "" or another tag: LangDefault
}

// codeData is what the code templates see.
type codeData struct {
	Lang    string
	Code    string
	Email   string
	Minutes int
}

// RenderCode renders the mail of a verification code: the scene's subject
// (which carries the code), text and HTML. An unknown scene gives
// ErrUnknownScene. Everything from c is escaped in the HTML part.
func RenderCode(c Code) (Content, error) {
	name, ok := sceneFiles[c.Scene]
	if !ok {
		return Content{}, fmt.Errorf("%w %q (want one of %v)", ErrUnknownScene, c.Scene, Scenes())
	}
	if len(c.Code) != 6 || strings.Trim(c.Code, "0123456789") != "" {
		return Content{}, errors.New("mail: render code: want exactly 6 digits")
	}
	if c.TTL <= 0 {
		return Content{}, fmt.Errorf("mail: render code: TTL %v, want > 0", c.TTL)
	}
	lang := normLang(c.Lang)
	data := codeData{Lang: lang, Code: c.Code, Email: c.Email, Minutes: max(1, int(c.TTL/time.Minute))}
	return render(templateKey{lang, name}, "code", data)
}

// Receipt is a payment receipt mail (PaymentReceiptDispatchMessage).
type Receipt struct {
	Email         string    // the recipient, named in the mail
	OutTradeNo    string    // required
	ProductCode   string    // pro-month, agent-recharge (named in the mail's language); another code is shown as is
	AmountFen     int64     // in fen (1/100 yuan); 0: not known (the contract's null), not shown
	Currency      string    // CNY or "" (shown as ¥); another code is written after the amount
	Channel       string    // ALIPAY, WECHAT; "": not shown
	TransactionID string    // the gateway's; "": not shown
	PaidAt        time.Time // shown in UTC+8; zero: not shown
	ExpireAt      time.Time // end of the benefit (pro-month); zero: not shown
	Lang          string    // as Code.Lang
}

// receiptData is what the receipt templates see: values formatted.
type receiptData struct {
	Lang          string
	Email         string
	OutTradeNo    string
	Product       string
	Amount        string
	Channel       string
	TransactionID string
	PaidAt        string
	ExpireAt      string
}

// RenderReceipt renders the receipt of a paid order. Everything from r is
// escaped in the HTML part.
func RenderReceipt(r Receipt) (Content, error) {
	if r.OutTradeNo == "" {
		return Content{}, errors.New("mail: render receipt: no order number")
	}
	if r.AmountFen < 0 {
		return Content{}, fmt.Errorf("mail: render receipt %s: amount %d fen", r.OutTradeNo, r.AmountFen)
	}
	lang := normLang(r.Lang)
	data := receiptData{
		Lang:          lang,
		Email:         r.Email,
		OutTradeNo:    r.OutTradeNo,
		Product:       r.ProductCode,
		Channel:       r.Channel,
		TransactionID: r.TransactionID,
		PaidAt:        formatTime(r.PaidAt),
		ExpireAt:      formatTime(r.ExpireAt),
	}
	if r.AmountFen > 0 {
		data.Amount = FormatFen(r.AmountFen, r.Currency)
	}
	return render(templateKey{lang, "receipt"}, "receipt", data)
}

// FormatFen writes an amount in fen as yuan with two decimals, exactly (no
// floating point): 1990 is "¥19.90" for CNY or "", "19.90 USD" otherwise.
func FormatFen(fen int64, currency string) string {
	sign, u := "", uint64(fen)
	if fen < 0 {
		sign, u = "-", uint64(-(fen+1))+1 // no overflow at math.MinInt64
	}
	n := fmt.Sprintf("%s%d.%02d", sign, u/100, u%100)
	if currency == "" || currency == "CNY" {
		return "¥" + n
	}
	return n + " " + currency
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.In(utc8).Format("2006-01-02 15:04:05") + " (UTC+8)"
}
