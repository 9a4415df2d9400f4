package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
)

// consoleAddrDefault is where islectl console listens unless told.
const consoleAddrDefault = "127.0.0.1:8090"

// runConsole serves the operator console alone (doc/console.md), without
// tokens: on loopback only, so that whoever can open it is already on this
// machine, unless -allow-remote says otherwise. The API serves the same
// console under /admin/ to admin tokens, for everyone else.
func runConsole(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	fs.SetOutput(e.out)
	addr := fs.String("addr", consoleAddrDefault, "address to listen on: loopback unless -allow-remote")
	remote := fs.Bool("allow-remote", false, "listen on a non-loopback address too: anyone who reaches it acts as an operator, without a token")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	loopback, err := isLoopback(*addr)
	if err != nil {
		return usagef("-addr %q: %v", *addr, err)
	}
	if !loopback && !*remote {
		return usagef("-addr %s is not a loopback address: islectl console asks for no token, so it listens on 127.0.0.1 or localhost only "+
			"(-allow-remote to listen there anyway; the API serves the console under /admin/ to admin tokens)", *addr)
	}
	cfg, tp, db, err := openDB(e)
	if err != nil {
		return err
	}
	defer store.CloseMySQL(db)
	if err := store.CheckSchema(ctx, db); err != nil {
		return err
	}
	rdb, err := openRedis(cfg)
	if err != nil {
		return err
	}
	defer rdb.Close()
	log := app.NewLogger(e.progress, cfg.Log.Level, "text", "islectl")
	pub, err := messaging.NewPublisher(messaging.PublisherConfig{
		URL: cfg.AMQP.URL, URLs: cfg.AMQP.URLs, Name: "islectl-console", Timeout: cfg.AMQP.PublishTimeout, Channels: 2,
	}, tp, nil, log)
	if err != nil {
		return err
	}
	defer pub.Close()
	user, _ := e.lookupEnv("USER")
	operator := "local:" + cmp.Or(user, "operator")
	con, err := app.NewConsole(cfg.Console, cfg.AMQP,
		app.ConsoleSite{Binary: "islectl console", Operator: func(*http.Request) string { return operator }},
		app.Backends{DB: db, Redis: rdb, Topology: tp, Publisher: pub, Log: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	var h http.Handler = con
	if loopback {
		h = loopbackHosts(con)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go con.Run(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String() + "/"
	if loopback {
		fmt.Fprintf(e.out, "operator console on %s (no token asked: loopback only; actions are logged as %s)\n", url, operator)
	} else {
		fmt.Fprintf(e.out, "operator console on %s WITHOUT AUTHENTICATION on a non-loopback address: anyone who reaches it acts as %s\n", url, operator)
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// isLoopback reports whether a listen address is on loopback only.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// loopbackHosts refuses requests that name another host than a loopback
// one: a web page whose name an attacker points at 127.0.0.1 (DNS
// rebinding) reaches the port but names its own host, and is refused.
func loopbackHosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.Trim(host, "[]")
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			http.Error(w, "islectl console answers requests for 127.0.0.1 or localhost only", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}
