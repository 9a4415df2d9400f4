package mail_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	isle "github.com/eisland/isle/internal/kit/mail"
)

func ExampleValidAddress() {
	fmt.Println(isle.ValidAddress("user@example.com"))
	err := isle.ValidAddress("user@example.com\r\nBcc: everyone@example.com")
	fmt.Println(errors.Is(err, isle.ErrBadAddress))
	// Output:
	// <nil>
	// true
}

// A consumer renders the scene's mail and sends it under the dispatch's key;
// here through the development mailer.
func ExampleRenderCode() {
	dir, err := os.MkdirTemp("", "mail-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = os.RemoveAll(dir) }()
	mailer, err := isle.Open("file://"+dir+"?from=Isle%20%3Cno-reply%40isle.example%3E", isle.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := isle.RenderCode(isle.Code{Scene: "REGISTER", Code: "042917", Email: "user@example.com", TTL: 5 * time.Minute, Lang: isle.LangEN})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Subject)
	err = mailer.Send(context.Background(), c.Message("user@example.com", "code-3f1c2a9e"))
	fmt.Println(err)
	_, err = os.Stat(filepath.Join(dir, "code-3f1c2a9e.eml"))
	fmt.Println(err)
	// Output:
	// 042917 is your Isle sign-up code
	// <nil>
	// <nil>
}
