// Command api is Isle's HTTP API: it takes client requests, does the fast
// Redis-side work and publishes messages to RabbitMQ (the API conventions: README, openapi.yaml).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/internal/service/httpapi"
)

func main() { app.Main("api", run) }

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool)) error {
	svc, cfg, err := app.Start(ctx, args, lookupEnv, app.Binary[config.API]{
		Name: "api", Load: loadAPI, Warn: warn,
		Log: func(c *config.API) config.Log { return c.Log },
		Needs: func(c *config.API) app.Needs {
			return app.Needs{MySQL: &c.MySQL, Redis: &c.Redis, AMQP: &c.AMQP, Declare: true}
		},
	})
	if err != nil {
		return err
	}
	defer svc.Close()
	log, opened, reg := svc.Log, svc.Opened, svc.Registry

	pub, err := messaging.NewPublisher(messaging.PublisherConfig{
		URL: cfg.AMQP.URL, URLs: cfg.AMQP.URLs, Name: "isle-api", Timeout: cfg.AMQP.PublishTimeout, Channels: cfg.AMQP.PublishChannels,
	}, opened.Topology, messaging.NewMetrics(reg), log)
	if err != nil {
		return err
	}
	defer pub.Close()
	uploads, err := app.OpenStore("source", cfg.Objects.Source, cfg.Objects.MaxBytes()) // the API stores uploads only
	if err != nil {
		return err
	}
	alipay, wechat, err := gateways(cfg.Payments)
	if err != nil {
		return err
	}
	charges := billing.New(opened.DB, opened.Redis)
	go charges.WatchPrices(ctx, log)
	var admin http.Handler // the operator console under /admin/
	if cfg.Console.Enabled {
		con, err := app.NewConsole(cfg.Console, cfg.AMQP, app.ConsoleSite{
			Prefix: "/admin", Binary: "api",
			Operator: func(r *http.Request) string { p, _ := httpapi.PrincipalFrom(r.Context()); return p.Subject },
			CSRFKey:  app.ConsoleCSRFKey(cfg.JWT.Secret),
		}, app.Backends{DB: opened.DB, Redis: opened.Redis, Topology: opened.Topology, Publisher: pub, Log: log})
		if err != nil {
			return err
		}
		go con.Run(ctx)
		admin = con
	}
	api, err := httpapi.New(httpapi.Config{
		MaxBodyBytes: cfg.HTTP.MaxBodyBytes, JWTSecret: cfg.JWT.Secret, JWTLeeway: cfg.JWT.Leeway,
		Proxies: cfg.HTTP.Proxies, PublicMetrics: cfg.HTTP.PublicMetrics,
		BanCheckInterval: cfg.HTTP.BanCheckInterval,
		AvatarMaxBytes:   cfg.Objects.AvatarMaxBytes, WallpaperMaxBytes: cfg.Objects.WallpaperMaxBytes,
		CodePepper: []byte(cfg.HTTP.CodePepper), ScoreSubmitPerMinute: cfg.HTTP.ScoreSubmitPerMinute,
		UsageBatchMax: cfg.HTTP.UsageBatchMax,
	}, httpapi.Backends{
		DB: opened.DB, Redis: opened.Redis, Publisher: pub, Log: log, Registry: reg, Topology: opened.Topology,
		Billing: charges, Objects: uploads, Alipay: alipay, Wechat: wechat, Admin: admin,
	})
	if err != nil {
		return err
	}
	if err := api.CheckBans(ctx); err != nil { // a Redis that lost its data has its bans back before the first request
		return err
	}
	go api.WatchBans(ctx)

	ops, err := svc.ServeOps(cfg.HTTP.OpsAddr)
	if err != nil {
		return err
	}
	defer ops.Close(log)

	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		WriteTimeout:      cfg.HTTP.WriteTimeout,
		IdleTimeout:       cfg.HTTP.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.InfoContext(ctx, "api started", "addr", ln.Addr().String(), "ops", ops.Addr(), "prefix", opened.Topology.Prefix(), "routes", len(api.Routes()),
		"console", cfg.Console.Enabled, "metrics", metricsAt(ops.Addr(), ln.Addr().String(), cfg.HTTP.PublicMetrics))

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.InfoContext(ctx, "api stopping: finishing requests in flight", "timeout", cfg.HTTP.ShutdownTimeout)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.InfoContext(ctx, "api stopped")
	return nil
}

// warn logs what the configuration is unsafe or outdated for.
func warn(ctx context.Context, log *slog.Logger, cfg *config.API) {
	if cfg.JWT.IsDefault {
		log.WarnContext(ctx, "ISLE_DEV=1 and no API_JWT_SECRET: using the public development key; anyone can mint tokens for this API")
	}
	if cfg.HTTP.TrustProxyOld {
		log.WarnContext(ctx, "API_TRUST_PROXY is deprecated: it now trusts X-Forwarded-For from a proxy on this machine only (127.0.0.0/8, ::1); "+
			"behind a proxy elsewhere set API_TRUSTED_PROXIES to its addresses (doc/edge.md)")
	}
	if cfg.Payments.TestKeys { // only with ISLE_DEV=1: the configuration refuses them otherwise
		log.WarnContext(ctx, "ISLE_DEV=1 and local TEST payment gateway keys (islectl pay keys): whoever has their private halves can make this API take a payment; never in production")
	}
}

// metricsAt says where /metrics is served, for the start line.
func metricsAt(ops, addr string, public bool) []string {
	var at []string
	if ops != "" {
		at = append(at, ops)
	}
	if public {
		at = append(at, addr)
	}
	return at
}

// gateways builds the verifiers of the payment gateways that are
// configured; the others stay nil and their callbacks are refused.
func gateways(p config.Payments) (*paynotify.AlipayVerifier, *paynotify.WechatVerifier, error) {
	var (
		alipay *paynotify.AlipayVerifier
		wechat *paynotify.WechatVerifier
		err    error
	)
	if p.AlipayConfigured() {
		alipay, err = paynotify.NewAlipayVerifier(paynotify.AlipayConfig{PublicKey: p.AlipayPublicKey, AppID: p.AlipayAppID, SellerID: p.AlipaySellerID})
		if err != nil {
			return nil, nil, fmt.Errorf("PAYMENT_ALIPAY_*: %w", err)
		}
	}
	if p.WechatConfigured() {
		wechat, err = paynotify.NewWechatVerifier(paynotify.WechatConfig{APIv3Key: p.WechatAPIv3Key, PlatformCerts: p.WechatPlatformCerts,
			PublicKey: p.WechatPublicKey, PublicKeyID: p.WechatPublicKeyID, MchID: p.WechatMchID, AppID: p.WechatAppID})
		if err != nil {
			return nil, nil, fmt.Errorf("PAYMENT_WECHAT_*: %w", err)
		}
	}
	return alipay, wechat, nil
}

// loadAPI is config.LoadAPI, refusing a profiler with no operations
// address before anything is opened: it is never served on the API's own.
func loadAPI(lookupEnv func(string) (string, bool)) (config.API, error) {
	cfg, err := config.LoadAPI(lookupEnv)
	if err == nil && cfg.Log.Pprof && cfg.HTTP.OpsAddr == "" {
		err = errors.New("PPROF_ENABLED=true needs API_OPS_ADDR: the profiler is never served on the API's own address")
	}
	return cfg, err
}
