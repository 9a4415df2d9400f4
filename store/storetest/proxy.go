package storetest

import (
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of a real service, for fault tests: Pause
// makes it hold every byte (a stuck peer: connections stay open, nothing
// moves), Resume lets traffic flow again, Cut closes every connection (a
// network failure), and Down/Up make the service unreachable and back.
type Proxy struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	paused   bool
	down     bool
	resumed  *sync.Cond
	conns    []net.Conn
	dial     func(network, addr string) (net.Conn, error) // net.Dial; tests of the proxy hold it
}

// NewProxy listens on a free loopback port and forwards to upstream
// (host:port) until the test ends.
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	Services(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("storetest: proxy: %v", err)
	}
	p := newProxy(ln, upstream, net.Dial)
	t.Cleanup(p.close)
	return p
}

func newProxy(ln net.Listener, upstream string, dial func(network, addr string) (net.Conn, error)) *Proxy {
	p := &Proxy{ln: ln, upstream: upstream, dial: dial}
	p.resumed = sync.NewCond(&p.mu)
	go p.accept()
	return p
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.Resume()
	p.Cut()
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Pause holds all traffic until Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

// Resume lets traffic flow again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
	p.resumed.Broadcast()
}

// Down makes the service unreachable: open connections are closed and new
// ones are closed at once, until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.Cut()
}

// Up makes the service reachable again after Down.
func (p *Proxy) Up() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// Cut closes every open connection; new ones are still accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

func (p *Proxy) accept() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.isDown() {
			_ = down.Close()
			continue
		}
		up, err := p.dial("tcp", p.upstream)
		if err != nil {
			_ = down.Close()
			continue
		}
		// Down may have come while the upstream was dialled: its Cut did
		// not see this pair, so it is checked again with the pair added
		// under the same lock, or a connection would outlive Down.
		p.mu.Lock()
		refused := p.down
		if !refused {
			p.conns = append(p.conns, down, up)
		}
		p.mu.Unlock()
		if refused {
			_ = down.Close()
			_ = up.Close()
			continue
		}
		go p.pipe(up, down)
		go p.pipe(down, up)
	}
}

func (p *Proxy) isDown() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.paused {
				p.resumed.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
