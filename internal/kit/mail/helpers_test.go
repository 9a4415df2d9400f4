package mail_test

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"
)

// smtpServer is a real SMTP server (go-smtp) on 127.0.0.1 that keeps what
// it receives.
type smtpServer struct {
	addr string
	// user and pass, when set, require AUTH PLAIN before MAIL.
	user, pass string
	// refuse answers RCPT TO for these addresses with the given reply.
	refuse map[string]*smtp.SMTPError

	mu       sync.Mutex
	sessions int
	received []received
}

// received is one message as delivered.
type received struct {
	from string
	to   []string
	data []byte
}

func startSMTP(t *testing.T, configure func(*smtpServer)) *smtpServer {
	t.Helper()
	s := &smtpServer{refuse: map[string]*smtp.SMTPError{}}
	if configure != nil {
		configure(s)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.addr = l.Addr().String()
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		s.mu.Lock()
		s.sessions++
		s.mu.Unlock()
		return &smtpSession{srv: s, authed: s.user == ""}, nil
	}))
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true // PLAIN without TLS, on loopback
	srv.ReadTimeout = 5 * time.Second
	srv.WriteTimeout = 5 * time.Second
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		// Close misses a listener that Serve has not registered yet.
		_ = l.Close()
		err := <-done
		require.True(t, err == nil || errors.Is(err, smtp.ErrServerClosed), "serve: %v", err)
	})
	return s
}

func (s *smtpServer) messages() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.received...)
}

func (s *smtpServer) sessionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions
}

type smtpSession struct {
	srv    *smtpServer
	authed bool
	from   string
	to     []string
}

func (s *smtpSession) AuthMechanisms() []string {
	if s.srv.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.srv.user || pass != s.srv.pass {
			return smtp.ErrAuthFailed
		}
		s.authed = true
		return nil
	}), nil
}

func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if !s.authed {
		return smtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if e, ok := s.srv.refuse[to]; ok {
		return e
	}
	s.to = append(s.to, to)
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.srv.mu.Lock()
	s.srv.received = append(s.srv.received, received{from: s.from, to: s.to, data: b})
	s.srv.mu.Unlock()
	return nil
}

func (s *smtpSession) Reset()        { s.from, s.to = "", nil }
func (s *smtpSession) Logout() error { return nil }

// parsed is a delivered message taken apart.
type parsed struct {
	header mail.Header
	text   string
	html   string
}

// parseMail reads an RFC 5322 message whose body is multipart/alternative
// with a text/plain and a text/html part (transfer encodings decoded,
// CRLF read as LF).
func parseMail(t *testing.T, raw []byte) parsed {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	require.NoError(t, err)
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/alternative", mt)
	p := parsed{header: m.Header}
	mr := multipart.NewReader(m.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(part)
		require.NoError(t, err)
		ct, _, err := mime.ParseMediaType(part.Header.Get("Content-Type"))
		require.NoError(t, err)
		s := strings.ReplaceAll(string(body), "\r\n", "\n")
		switch ct {
		case "text/plain":
			require.Empty(t, p.text, "two text parts")
			p.text = s
		case "text/html":
			require.Empty(t, p.html, "two HTML parts")
			p.html = s
		default:
			t.Fatalf("unexpected part %s", ct)
		}
	}
	require.NotEmpty(t, p.text, "no text part")
	require.NotEmpty(t, p.html, "no HTML part")
	return p
}

// decodeHeader decodes RFC 2047 words.
func decodeHeader(t *testing.T, v string) string {
	t.Helper()
	s, err := new(mime.WordDecoder).DecodeHeader(v)
	require.NoError(t, err)
	return s
}
