package proctest

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// FaultProxy forwards TCP connections to PostgreSQL, and does to them what a network does when it
// fails: Cut closes every connection and refuses new ones, as a database going down would, until
// Restore; Blackhole keeps every connection open but passes nothing either way, as a partition or
// a lost host does, until Restore.
type FaultProxy struct {
	DSN string // the database URL, through the proxy

	mu       sync.Mutex
	down     bool
	holes    bool // black-holed: bytes read are dropped
	active   map[net.Conn]bool
	upstream string
}

// StartFaultProxy starts a proxy to the PostgreSQL server of dsn, on a loopback port, passing
// everything; it cuts every connection when the test ends.
func StartFaultProxy(t testing.TB, dsn string) *FaultProxy {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listener.Close() })
	p := &FaultProxy{upstream: u.Host, active: map[net.Conn]bool{}}
	u.Host = listener.Addr().String()
	p.DSN = u.String()
	go func() {
		for {
			client, err := listener.Accept()
			if err != nil {
				return
			}
			go p.forward(client)
		}
	}()
	t.Cleanup(p.Cut)
	return p
}

func (p *FaultProxy) forward(client net.Conn) {
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.active[client], p.active[server] = true, true
	p.mu.Unlock()
	go func() { p.pass(server, client); server.Close() }()
	p.pass(client, server)
	client.Close()
}

// pass copies from src to dst, dropping what it reads while the proxy is black-holed.
func (p *FaultProxy) pass(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			holes := p.holes
			p.mu.Unlock()
			if !holes {
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// Cut closes every connection and refuses new ones, until Restore.
func (p *FaultProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.active {
		c.Close()
		delete(p.active, c)
	}
}

// Blackhole keeps every connection open and drops what either side sends, until Restore.
func (p *FaultProxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holes = true
}

// Restore passes everything again.
func (p *FaultProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down, p.holes = false, false
}
