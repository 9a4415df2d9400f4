package messaging

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// loopback returns both ends of a TCP connection on 127.0.0.1.
func loopback(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// idle waits until c's writer goroutine has written everything and ended.
func idle(c *coalescingConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.writing {
		c.drained.Wait()
	}
}

func TestCoalescingConnKeepsEveryByteInOrder(t *testing.T) {
	client, server := loopback(t)
	c := coalesce(client)
	var want bytes.Buffer
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20_000 {
		p := make([]byte, 1+rng.IntN(300))
		for j := range p {
			p[j] = byte(i + j)
		}
		want.Write(p)
		if n, err := c.Write(p); n != len(p) || err != nil {
			t.Fatalf("write %d: n=%d err=%v", i, n, err)
		}
		if i%1000 == 0 {
			idle(c) // the writer goes idle, and starts again at the next Write
		}
	}
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(server)
		got <- b
	}()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("received %d bytes, want %d, equal=%v", len(b), want.Len(), bytes.Equal(b, want.Bytes()))
	}
	if _, err := c.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v, want net.ErrClosed", err)
	}
}

func TestCoalescingConnReportsAFailedWriteAndClosesTheSocket(t *testing.T) {
	client, server := loopback(t)
	c := coalesce(client)
	server.Close()
	// Each write goes out before the next (idle): the peer's reset comes
	// back to one of them, and the Write after it returns its error.
	var err error
	for i := 0; err == nil; i++ {
		if i == 1000 {
			t.Fatal("1,000 writes to a closed peer succeeded")
		}
		_, err = c.Write(make([]byte, 64<<10))
		idle(c)
	}
	// The socket is closed, so a reader of the connection stops too.
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, rerr := client.Read(make([]byte, 1)); !errors.Is(rerr, net.ErrClosed) {
		t.Fatalf("read after the failed write: %v, want net.ErrClosed", rerr)
	}
}

func TestCoalescingConnHoldsWritersBackWhenThePeerStopsReading(t *testing.T) {
	client, _ := loopback(t) // the server end never reads
	c := coalesce(client)
	var wg sync.WaitGroup
	stuck := make(chan struct{})
	wg.Go(func() {
		p := make([]byte, 32<<10)
		for range 1 << 12 { // 128 MiB: far more than the kernel's and our buffers
			if _, err := c.Write(p); err != nil {
				close(stuck)
				return
			}
		}
		t.Error("128 MiB were accepted without the peer reading")
	})
	// The kernel's buffers fill, the writer goroutine is stuck in its write,
	// and the bytes behind it reach the bound: Write waits there.
	var waiting int
	require.Eventually(t, func() bool {
		c.mu.Lock()
		waiting = len(c.buf)
		c.mu.Unlock()
		return waiting >= coalesceMax
	}, 30*time.Second, time.Millisecond, "the buffer never reached its bound")
	require.LessOrEqual(t, waiting, coalesceMax+32<<10, "bytes waiting beyond the bound and one write")
	// Close unblocks the writer (its write deadline passes) within closeFlushBy.
	began := time.Now()
	_ = c.Close()
	<-stuck
	wg.Wait()
	if d := time.Since(began); d > 5*closeFlushBy {
		t.Errorf("Close took %v with a peer that does not read", d)
	}
}
