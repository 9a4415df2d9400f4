// Command islectl is the operator's CLI: migrations, the wire contract on the
// broker, queue depths, the operator console, dead messages, users, bans,
// tokens and pricing; and, for local development and demos, test payment
// gateway keys and callbacks signed with them (never for production), and a
// demo that drives traffic through every domain of a running fleet and
// summarises what took effect.
//
//	islectl migrate
//	islectl topology show [-json]
//	islectl topology apply
//	islectl topology verify [-amqp-only]
//	islectl queues
//	islectl console [-addr 127.0.0.1:8090] [-allow-remote]
//	islectl dlq list [-domain D] [-since 24h] [-all] [-limit N]
//	islectl dlq show DOMAIN/ID
//	islectl dlq replay DOMAIN/ID... [-force] | -domain D -all [-force]
//	islectl users create USER [-email E] [-balance FEN] | credit USER FEN [-id ID] | ban USER [-reason R] | unban USER | bans
//	islectl pricing set MODEL -input FEN -cached FEN -output FEN -reasoning FEN | list
//	islectl token -user NAME [-role user|service|admin] [-ttl 24h]
//	islectl bench [-url URL] [-json] [-short] [-keep] [-bin DIR]
//	islectl pay keys [-dir var/paykeys] [-force]
//	islectl pay simulate -order OUT_TRADE_NO [-channel alipay|wechat] [-amount FEN] [-state SUCCESS|CLOSED|...]
//	                     [-api URL] [-dir var/paykeys] [-notify-id ID] [-transaction-id ID] [-force]
//	islectl demo [-duration 40s] [-wait 30s] [-users 5] [-codes 3] [-api URL] [-paykeys var/paykeys]
//	             [-mail-dir var/mail] [-mailpit http://127.0.0.1:8025]
//
// islectl demo (after scripts/up, from the repository's root) creates the
// users demo-01.. (or reuses them), sets the price of gpt-demo, and for
// -duration charges agent usage, asks for email codes, opens orders and pays
// them with callbacks signed with the local test keys, records identity
// passes, uploads avatars and wallpapers and plays the mini games, within
// the API's rate limits; then it waits, -wait at most, for the effects and
// prints what was sent, accepted and took effect per domain, the balances,
// the leaderboards, the dead messages and where the mails are. Its
// progress goes to stderr. It exits 0 once it has run, rate limited or not,
// and 1 when the fleet does not answer.
// It reads the same environment variables as the fleet (doc/config.md).
// Exit status: 0 success, 1 failure or a difference found, 2 bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// go-redis's own lines (through Sentinel, one per connection): only
	// its warnings, on stderr.
	store.LogRedisTo(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "islectl:", err)
	if errors.Is(err, errUsage) {
		os.Exit(2)
	}
	os.Exit(1)
}

// errUsage marks a command line islectl cannot run.
var errUsage = errors.New("usage")

func usagef(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// env is what every command gets.
type env struct {
	lookupEnv func(string) (string, bool)
	out       io.Writer
	progress  io.Writer // what a long command says while it runs (stderr)
}

type command struct {
	summary string
	run     func(ctx context.Context, e env, args []string) error
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"migrate":  {"apply pending MySQL migrations (creates the database if missing)", runMigrate},
		"topology": {"show | apply | verify the RabbitMQ wire contract", runTopology},
		"queues":   {"depth and consumers of every queue of the topology", runQueues},
		"console":  {"[-addr 127.0.0.1:8090]: the operator console in a browser, on loopback (doc/console.md)", runConsole},
		"dlq":      {"list | show ID | replay ID... | replay --domain D --all: stored dead messages", runDLQ},
		"outbox":   {"parked | replay ID... [-table T] | replay --all [-table T]: outbox rows that cannot be published", runOutbox},
		"users":    {"create USER [-email E] [-balance FEN] | credit USER FEN [-id ID] | ban USER [-reason R] | unban USER | bans", runUsers},
		"pricing":  {"set MODEL -input FEN -cached FEN -output FEN -reasoning FEN | list: agent model prices per million tokens", runPricing},
		"token":    {"-user NAME [-role user|service|admin] [-ttl 24h]: mint a bearer token for local use", runToken},
		"bench":    {"[-url URL] [-json] [-short]: measure the billing path against raw baselines (doc/performance.md)", runBench},
		"demo":     {"[-duration 40s] [-users N]: drive traffic through every domain of a running fleet and summarise what took effect", runDemo},
		"pay":      {"keys [-dir D] [-force] | simulate -order NO [-channel C] [-amount FEN] [-state S]: local test gateway keys and signed callbacks", runPay},
	}
}

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), out, progress io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printUsage(out)
		if len(args) == 0 {
			return usagef("no command")
		}
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return usagef("unknown command %q (try `islectl help`)", args[0])
	}
	return cmd.run(ctx, env{lookupEnv: lookupEnv, out: out, progress: progress}, args[1:])
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: islectl <command> [arguments]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nSettings come from environment variables: see doc/config.md.")
}

// subcommand splits args into a subcommand among allowed and its arguments.
func subcommand(args []string, allowed ...string) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, usagef("want one of: %s", strings.Join(allowed, ", "))
	}
	for _, a := range allowed {
		if args[0] == a {
			return a, args[1:], nil
		}
	}
	return "", nil, usagef("unknown subcommand %q, want one of: %s", args[0], strings.Join(allowed, ", "))
}

// parseFlags parses flags wherever they stand among the positional
// arguments ("dlq replay email/12 -force" as well as "-force email/12") and
// returns the positional ones.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usagef("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// load reads the configuration and resolves the topology it names.
func load(e env) (config.Islectl, *topology.Topology, error) {
	cfg, err := config.LoadIslectl(e.lookupEnv)
	if err != nil {
		return cfg, nil, fmt.Errorf("configuration:\n%w", err)
	}
	tp, err := topology.New(cfg.AMQP.Topology)
	return cfg, tp, err
}

// openDB loads the configuration and opens MySQL with it; the caller closes
// the DB with store.CloseMySQL.
func openDB(e env) (config.Islectl, *topology.Topology, *gorm.DB, error) {
	cfg, tp, err := load(e)
	if err != nil {
		return cfg, nil, nil, err
	}
	db, err := store.OpenMySQL(cfg.MySQL)
	return cfg, tp, db, err
}

// openRedis opens the Redis clients cfg names. It does not run the start-up
// cleanup app.OpenRedis does: the caches belong to the running fleet, and an
// operator's command must not empty them.
func openRedis(cfg config.Islectl) (*store.Redis, error) {
	return store.OpenRedis(cfg.Redis.RedisConfig)
}
