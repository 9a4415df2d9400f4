package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A binary of the bench's own fleet: started, watched through its log
// lines, stopped.

// startTimeout bounds a binary's start-up, from exec to its "started" line.
const startTimeout = 60 * time.Second

// binary is one fleet process the bench started: api, worker or relay. Its log
// goes to a file in the bench's directory.
type binary struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
	err    error

	mu      sync.Mutex
	started map[string]any // the fields of its "<name> started" line
	ready   chan struct{}
}

// startBinary starts path with env (appended to the bench's environment)
// and args, and waits for its "<name> started" log line.
func startBinary(ctx context.Context, dir, path, name string, env []string, args ...string) (*binary, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = logFile
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	b := &binary{name: name, cmd: cmd, log: logPath, exited: make(chan struct{}), ready: make(chan struct{})}
	go func() {
		defer close(b.exited)
		b.scan(stderr, logFile)
		b.err = cmd.Wait()
		logFile.Close()
	}()
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case <-b.ready:
		return b, nil
	case <-b.exited:
		return nil, fmt.Errorf("%s exited before it started (%v); its log: %s\n%s", name, b.err, logPath, tail(logPath, 20))
	case <-t.C:
		b.kill()
		return nil, fmt.Errorf("%s did not start within %s; its log: %s\n%s", name, startTimeout, logPath, tail(logPath, 20))
	case <-ctx.Done():
		b.kill()
		return nil, ctx.Err()
	}
}

// scan copies the binary's log to w and notes its "started" line.
func (b *binary) scan(r io.Reader, w io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	marker := `"msg":"` + b.name + ` started"`
	for sc.Scan() {
		line := sc.Bytes()
		_, _ = w.Write(append(line, '\n'))
		if b.started == nil && strings.Contains(string(line), marker) {
			var fields map[string]any
			if json.Unmarshal(line, &fields) == nil {
				b.mu.Lock()
				b.started = fields
				b.mu.Unlock()
				close(b.ready)
			}
		}
	}
	_, _ = io.Copy(w, r)
}

// field is a string field of the binary's "started" line.
func (b *binary) field(name string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, _ := b.started[name].(string)
	return s
}

// number is a numeric field of the binary's "started" line; 0 if it has none.
func (b *binary) number(name string) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, _ := b.started[name].(float64)
	return n
}

func (b *binary) pid() int { return b.cmd.Process.Pid }

// stop sends SIGTERM and waits for the exit, killing the process after
// timeout.
func (b *binary) stop(timeout time.Duration) error {
	select {
	case <-b.exited:
		return nil
	default:
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
		var ee *exec.ExitError
		if b.err != nil && !errors.As(b.err, &ee) {
			return b.err
		}
		return nil
	case <-time.After(timeout):
		b.kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", b.name, timeout)
	}
}

func (b *binary) kill() {
	_ = b.cmd.Process.Kill()
	<-b.exited
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
