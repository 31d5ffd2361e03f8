// The connection under a request, for what only the socket can do: a watch over HTTP/1.1 shrinks
// its connection's send buffer. The server must put it in every connection's context (ConnContext).
package handlers

import (
	"context"
	"net"
)

type connKey struct{}

// ConnContext is http.Server's ConnContext for this handler: it keeps the connection in the
// context of every request that arrives on it.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// tcpConnOf returns the TCP connection under a request, unwrapping the listener's own connection
// types (which say what they wrap with NetConn, as crypto/tls does); nil if there is none.
func tcpConnOf(ctx context.Context) *net.TCPConn {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	for c != nil {
		switch conn := c.(type) {
		case *net.TCPConn:
			return conn
		case interface{ NetConn() net.Conn }:
			c = conn.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// watchSendBuffer is the kernel's send buffer of an HTTP/1.1 connection that carries a watch. With
// the default, which Linux grows to megabytes, a client that stops reading has that much of every
// change queued in the kernel before a write blocks and the watch's write deadline can cut it; a
// small buffer makes a write block, and the stream end, after a few changes. HTTP/2 connections
// are cut by their own write-byte timeout instead.
const watchSendBuffer = 32 << 10
