// Package boundedgzip is gzip for RPC messages that stops inflating at the size limit.
package boundedgzip

import (
	"compress/gzip"
	"fmt"
	"io"

	"connectrpc.com/connect"
)

// HandlerOption replaces connect-go's gzip with one whose decompressor fails as soon as a message
// inflates past maxBytes. connect-go's own stops reading there too, but then inflates the rest of
// the message to report its size: a body just under the limit that expands to a gigabyte cost a
// second of CPU before it was refused. The answer is resource_exhausted, as for a message over the
// limit that was sent uncompressed: the protocols give a message too large that code whatever its
// encoding.
func HandlerOption(maxBytes int64) connect.HandlerOption {
	return connect.WithCompression("gzip",
		func() connect.Decompressor { return &boundedGunzip{limit: maxBytes} },
		func() connect.Compressor { return gzip.NewWriter(io.Discard) },
	)
}

// boundedGunzip is a gzip reader that yields at most limit bytes of one message.
type boundedGunzip struct {
	gz    gzip.Reader
	limit int64
	left  int64 // bytes it may still yield before the message is too large
}

func (d *boundedGunzip) Reset(r io.Reader) error {
	d.left = d.limit
	return d.gz.Reset(r)
}

func (d *boundedGunzip) Read(p []byte) (int, error) {
	n, err := d.gz.Read(p)
	d.left -= int64(n)
	if d.left < 0 {
		return n, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("the compressed message inflates past the limit of %d bytes", d.limit))
	}
	return n, err
}

func (d *boundedGunzip) Close() error { return d.gz.Close() }
