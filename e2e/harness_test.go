package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eisland/isle/store/storetest"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

var binDir string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // the tests that run the binaries skip (storetest.Services)
	}
	dir, err := os.MkdirTemp("", "isle-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", dir+"/", "../cmd/api", "../cmd/worker", "../cmd/relay", "../cmd/reconcile", "../cmd/islectl")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fleetEnv is the environment of a fleet isolated for one test: its own
// database (migrated or not), Redis key prefix and exchange prefix.
type fleetEnv map[string]string

func newFleetEnv(t *testing.T, dsn string) fleetEnv {
	t.Helper()
	_, prefix := storetest.AMQP(t)
	c, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	host, port := "127.0.0.1", "6379"
	if addr := storetest.RedisAddr(); strings.Contains(addr, ":") {
		host, port, _ = strings.Cut(addr, ":")
	}
	objects := t.TempDir()
	return fleetEnv{
		"OBJECT_STORE_SOURCE_URL":       "file://" + objects + "/source",
		"OBJECT_REPLICATION_TARGET_URL": "file://" + objects + "/replica",
		"IDENTITY_MATERIAL_STORE_URL":   "file://" + objects + "/identity",
		"EMAIL_MAILER_URL":              "file://" + objects + "/mail?from=no-reply%40isle.test",
		"MYSQL_DSN":                     c.FormatDSN(),
		"REDIS_HOST":                    host,
		"REDIS_PORT":                    port,
		"REDIS_KEY_PREFIX":              storetest.Unique("isletest:") + ":",
		"RABBITMQ_NAME_PREFIX":          prefix,
		"API_ADDR":                      "127.0.0.1:0",
		"API_OPS_ADDR":                  "127.0.0.1:0",
		"API_JWT_SECRET":                storetest.Unique("e2e-token-key-") + "-0123456789abcdef", // the API refuses to start without one
		"LOG_FORMAT":                    "json",
		"WORKER_SHUTDOWN_TIMEOUT":       "5s",
		"WORKER_OPS_ADDR":               "127.0.0.1:0",
		"RELAY_OPS_ADDR":                "127.0.0.1:0",
		"RECONCILE_OPS_ADDR":            "127.0.0.1:0",
	}
}

// mailDir is the directory of the fleet's file mailer.
func (e fleetEnv) mailDir() string {
	return strings.TrimPrefix(strings.SplitN(e["EMAIL_MAILER_URL"], "?", 2)[0], "file://")
}

func (e fleetEnv) list() []string {
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

// proc is a running binary whose stderr is collected line by line.
type proc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	done  chan error
}

func start(t *testing.T, e fleetEnv, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	cmd.Env = e.list()
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, done: make(chan error, 1)}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
	}()
	go func() {
		<-scanned
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done //nolint:errcheck // killed: its exit error says only that
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.output())
		}
	})
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitFor waits until a line contains all of want.
func (p *proc) waitFor(t *testing.T, timeout time.Duration, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		for _, l := range p.lines {
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(l, w)
			}
			if ok {
				p.mu.Unlock()
				return l
			}
		}
		p.mu.Unlock()
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("process exited (%v) before logging %q:\n%s", err, want, p.output())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no line with %q within %s:\n%s", want, timeout, p.output())
	return ""
}

// stop sends SIGTERM and returns the exit error and how long the exit took.
func (p *proc) stop(t *testing.T, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	began := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		return time.Since(began), err
	case <-time.After(timeout):
		t.Fatalf("no exit within %s of SIGTERM:\n%s", timeout, p.output())
	}
	return 0, nil
}

// islectl runs the CLI to completion.
func islectl(t *testing.T, e fleetEnv, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "islectl"), args...)
	cmd.Env = e.list()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), code
}

// freeAddr is a loopback address with a port nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}
