package storetest

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A connection whose upstream was still being dialled when Down came is
// closed, not kept: after Down no client is connected. (A publisher test
// waited for a reconnect to fail while its connection, accepted just
// before Down, stayed up.)
func TestProxyDownClosesAConnectionItWasDialling(t *testing.T) {
	t.Parallel()
	upstream, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer upstream.Close()
	go func() {
		for {
			c, err := upstream.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dialling, release := make(chan struct{}), make(chan struct{})
	p := newProxy(ln, upstream.Addr().String(), func(network, addr string) (net.Conn, error) {
		close(dialling)
		<-release
		return net.Dial(network, addr)
	})
	defer p.close()

	client, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer client.Close()
	<-dialling
	p.Down()
	close(release)

	require.NoError(t, client.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = client.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the connection accepted before Down is closed")
}
