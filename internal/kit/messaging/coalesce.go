package messaging

import (
	"net"
	"sync"
	"time"
)

// Bounds of a coalescingConn.
const (
	coalesceMax  = 1 << 20                // bytes waiting before a Write waits too
	closeFlushBy = 500 * time.Millisecond // how long Close lets waiting bytes go out
)

// coalescingConn lets the many small writes of a busy AMQP connection share
// system calls. amqp091 flushes its buffer after every publish, ack and
// heartbeat, each a write of a hundred bytes or so; under load those writes
// were a fifth of the API's CPU and made the broker read as many tiny
// segments. Here a Write appends to a buffer and returns; one goroutine at a
// time writes out whatever has gathered, so the writes that arrive while it
// is in the kernel leave together in its next call. An idle connection pays
// one goroutine start per write and no added wait.
//
// Order is kept (one writer at a time, in arrival order). A failed write is
// returned by every later Write and closes the socket, so the reader sees the
// connection end as it would have. Writes wait once coalesceMax bytes are
// waiting, so a broker that stops reading holds its publishers back instead
// of filling memory.
type coalescingConn struct {
	net.Conn
	mu      sync.Mutex
	drained sync.Cond // signalled when the writer has taken the buffer or stopped
	buf     []byte    // bytes waiting to be written
	spare   []byte    // the buffer last written, reused
	writing bool      // a writer goroutine is running
	err     error     // the first write error, or net.ErrClosed after Close
}

func coalesce(c net.Conn) *coalescingConn {
	cc := &coalescingConn{Conn: c}
	cc.drained.L = &cc.mu
	return cc
}

// Write queues p for the writer goroutine. Its error is the first error of
// an earlier write: p itself has not been written when Write returns.
func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.err == nil && len(c.buf) >= coalesceMax {
		c.drained.Wait()
	}
	if c.err != nil {
		return 0, c.err
	}
	c.buf = append(c.buf, p...)
	if !c.writing {
		c.writing = true
		go c.writeOut()
	}
	return len(p), nil
}

// writeOut writes the buffer until it stays empty or a write fails.
func (c *coalescingConn) writeOut() {
	c.mu.Lock()
	for len(c.buf) > 0 && c.err == nil {
		out := c.buf
		c.buf = c.spare[:0]
		c.drained.Broadcast()
		c.mu.Unlock()
		_, err := c.Conn.Write(out)
		c.mu.Lock()
		if cap(out) <= 2*coalesceMax {
			c.spare = out[:0]
		}
		if err != nil && c.err == nil {
			c.err = err
		}
	}
	c.writing = false
	c.drained.Broadcast()
	failed := c.err != nil
	c.mu.Unlock()
	if failed {
		_ = c.Conn.Close()
	}
}

// Close lets the bytes already written go out, for at most closeFlushBy
// (amqp091 closes the socket right after its last frame, the close-ok of a
// connection the broker closed), then closes the socket.
func (c *coalescingConn) Close() error {
	c.mu.Lock()
	if c.writing {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(closeFlushBy))
		for c.writing {
			c.drained.Wait()
		}
	}
	if c.err == nil {
		c.err = net.ErrClosed
	}
	c.mu.Unlock()
	return c.Conn.Close()
}
