package storetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the Sentinels of StartSentinel monitor.
const SentinelMaster = "isle"

// SentinelPassword is the password of the primary and the replica that
// StartSentinel starts (requirepass, masterauth).
const SentinelPassword = "isle-sentinel-test"

// sentinelWait bounds each wait for the processes of StartSentinel: their
// start, the Sentinels' view of the group, a failover. It is a ceiling for a
// slow machine, not an expected time.
const sentinelWait = 60 * time.Second

// Sentinel is a Redis group of its own for one test: a primary, one
// replica and three Sentinels (quorum 2), each a redis-server process on a
// free port of 127.0.0.1 with its files in t.TempDir(). Everything is
// killed when the test ends. The Redis of the other tests is not touched.
type Sentinel struct {
	t         testing.TB
	dir       string
	sentinels []string            // host:port
	servers   map[string]*process // primary and replica by address
}

// process is a started redis-server; exited closes when it has ended.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartSentinel starts the group and returns once every Sentinel knows the
// primary, the replica and the other Sentinels, and the replica has synced.
// It skips t under -short or when redis-server is not on PATH.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	if testing.Short() {
		t.Skip("starts redis-server processes: not run with -short")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not on PATH")
	}
	s := &Sentinel{t: t, dir: t.TempDir(), servers: map[string]*process{}}
	primary := s.start("primary", "")
	replica := s.start("replica", "replicaof 127.0.0.1 "+port(primary)+"\n")
	for i := range 3 {
		s.sentinels = append(s.sentinels, s.start(fmt.Sprintf("sentinel%d", i), fmt.Sprintf(
			"sentinel monitor %s 127.0.0.1 %s 2\n"+
				"sentinel auth-pass %s %s\n"+
				"sentinel down-after-milliseconds %s 2000\n"+
				"sentinel failover-timeout %s 5000\n",
			SentinelMaster, port(primary), SentinelMaster, SentinelPassword, SentinelMaster, SentinelMaster)))
	}
	s.waitReady(primary, replica)
	return s
}

// Addrs returns the Sentinels' addresses.
func (s *Sentinel) Addrs() []string { return append([]string(nil), s.sentinels...) }

// MasterAddr returns the primary's address as the first Sentinel that
// answers names it.
func (s *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	var errs []error
	for _, a := range s.sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: a})
		addr, err := masterOf(ctx, c)
		_ = c.Close()
		if err == nil {
			return addr, nil
		}
		errs = append(errs, fmt.Errorf("%s: %v", a, err))
	}
	return "", errors.Join(errs...)
}

// Kill sends SIGKILL to the primary or replica at addr and waits for it
// to end, as a crash would stop it.
func (s *Sentinel) Kill(addr string) {
	s.t.Helper()
	p := s.servers[addr]
	if p == nil {
		s.t.Fatalf("storetest: no Redis of the group at %s", addr)
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	delete(s.servers, addr)
}

// WaitFailover waits until every Sentinel names a master other than old
// and that master answers as a primary, and returns its address.
func (s *Sentinel) WaitFailover(old string) string {
	s.t.Helper()
	var got string
	s.poll("a master other than "+old, func(ctx context.Context) error {
		for _, a := range s.sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: a})
			addr, err := masterOf(ctx, c)
			_ = c.Close()
			if err != nil {
				return err
			}
			got = addr
			if got == old {
				return fmt.Errorf("sentinel %s still names %s", a, old)
			}
		}
		return s.isRole(ctx, got, "role:master")
	})
	return got
}

// start writes the configuration of one process and starts it on a free
// port, trying another port if the one picked was taken meanwhile; extra
// is appended to the common configuration.
func (s *Sentinel) start(name, extra string) string {
	s.t.Helper()
	sentinel := strings.HasPrefix(name, "sentinel")
	var lastErr error
	for attempt := range 5 {
		addr := freeAddr(s.t)
		dir := filepath.Join(s.dir, fmt.Sprintf("%s-%d", name, attempt))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			s.t.Fatal(err)
		}
		conf := fmt.Sprintf("port %s\nbind 127.0.0.1\nprotected-mode no\ndir %s\nlogfile %s\nsave \"\"\nappendonly no\n",
			port(addr), dir, filepath.Join(dir, "log"))
		if !sentinel {
			conf += fmt.Sprintf("requirepass %s\nmasterauth %s\nrepl-diskless-sync-delay 0\n", SentinelPassword, SentinelPassword)
		}
		conf += extra
		path := filepath.Join(dir, "redis.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			s.t.Fatal(err)
		}
		args := []string{path}
		if sentinel {
			args = append(args, "--sentinel")
		}
		cmd := exec.Command("redis-server", args...)
		cmd.SysProcAttr = dieWithParent()
		if err := cmd.Start(); err != nil {
			s.t.Fatalf("storetest: start redis-server: %v", err)
		}
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		s.t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		if lastErr = s.waitUp(addr, sentinel, exited); lastErr == nil {
			s.servers[addr] = &process{cmd: cmd, exited: exited}
			return addr
		}
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		lastErr = fmt.Errorf("%w; log:\n%s", lastErr, log)
	}
	s.t.Fatalf("storetest: redis-server %s did not start: %v", name, lastErr)
	return ""
}

// waitUp waits until the process at addr answers PING, or has exited.
func (s *Sentinel) waitUp(addr string, sentinel bool, exited <-chan struct{}) error {
	opts := &redis.Options{Addr: addr, MaxRetries: -1}
	if !sentinel {
		opts.Password = SentinelPassword
	}
	c := redis.NewClient(opts)
	defer c.Close()
	deadline := time.Now().Add(sentinelWait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("exited: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return err
		}
	}
}

// masterOf is the primary's host:port as the Sentinel c names it.
func masterOf(ctx context.Context, c *redis.SentinelClient) (string, error) {
	addr, err := c.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		return "", err
	}
	if len(addr) != 2 {
		return "", fmt.Errorf("get-master-addr-by-name answered %q", addr)
	}
	return net.JoinHostPort(addr[0], addr[1]), nil
}

// waitReady waits until the replica has synced and every Sentinel names
// the primary and knows the replica and the two other Sentinels: only then
// can they agree on a failover.
func (s *Sentinel) waitReady(primary, replica string) {
	s.t.Helper()
	s.poll("the replica's sync", func(ctx context.Context) error {
		return s.isRole(ctx, replica, "master_link_status:up")
	})
	s.poll("the Sentinels' view of the group", func(ctx context.Context) error {
		for _, a := range s.sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: a})
			defer c.Close()
			got, err := masterOf(ctx, c)
			if err != nil {
				return err
			}
			if got != primary {
				return fmt.Errorf("sentinel %s names %s", a, got)
			}
			replicas, err := c.Replicas(ctx, SentinelMaster).Result()
			if err != nil {
				return err
			}
			if len(replicas) != 1 {
				return fmt.Errorf("sentinel %s knows %d replicas", a, len(replicas))
			}
			others, err := c.Sentinels(ctx, SentinelMaster).Result()
			if err != nil {
				return err
			}
			if len(others) != len(s.sentinels)-1 {
				return fmt.Errorf("sentinel %s knows %d other sentinels", a, len(others))
			}
		}
		return nil
	})
}

// isRole checks that INFO replication of the server at addr says want.
func (s *Sentinel) isRole(ctx context.Context, addr, want string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: SentinelPassword, MaxRetries: -1})
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if !containsLine(info, want) {
		return fmt.Errorf("%s: no %q in INFO replication", addr, want)
	}
	return nil
}

// poll runs check every 50 ms until it succeeds; after sentinelWait it
// fails the test with check's last error.
func (s *Sentinel) poll(what string, check func(context.Context) error) {
	s.t.Helper()
	deadline := time.Now().Add(sentinelWait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("storetest: waited %v for %s: %v", sentinelWait, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func containsLine(text, line string) bool {
	for l := range strings.Lines(text) {
		if strings.TrimRight(l, "\r\n") == line {
			return true
		}
	}
	return false
}

// freeAddr returns an address of 127.0.0.1 with a port nothing listened
// on a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	if _, err := strconv.Atoi(p); err != nil {
		panic("storetest: bad address " + addr)
	}
	return p
}
