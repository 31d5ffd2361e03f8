package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRequestsFramedTwiceCloseTheirConnection sends, on raw HTTP/1.1 connections, requests whose
// body is framed by both Content-Length and Transfer-Encoding, or by an obs-folded
// Transfer-Encoding. Each is answered and its connection then closed (RFC 9112 section 6.1), so that
// nothing after it on the connection can be read with the other framing. A plain keep-alive request
// keeps its connection.
func TestRequestsFramedTwiceCloseTheirConnection(t *testing.T) {
	s := startServer(t)
	addr := strings.TrimPrefix(s.BaseURL, "http://")
	const body = "2\r\n{}\r\n0\r\n\r\n"
	cases := []struct {
		name, head string
		closes     bool
	}{
		{"Content-Length and Transfer-Encoding", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", true},
		{"Transfer-Encoding and Content-Length", "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", true},
		{"obs-folded Transfer-Encoding", "Transfer-Encoding:\r\n chunked\r\n", true},
		{"Content-Length alone", "Content-Length: 2\r\n", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			payload := body
			if !c.closes {
				payload = "{}"
			}
			if _, err := io.WriteString(conn, "POST /echo HTTP/1.1\r\nHost: usersd\r\nContent-Type: application/json\r\n"+c.head+"\r\n"+payload); err != nil {
				t.Fatal(err)
			}
			reader := bufio.NewReader(conn)
			res, err := http.ReadResponse(reader, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d; want 200", res.StatusCode)
			}
			// Is the connection still open? A closed one reads EOF at once; an open one times out.
			conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			_, err = reader.ReadByte()
			closed := err == io.EOF
			if closed != c.closes || res.Close != c.closes {
				t.Fatalf("connection closed: %v (Connection: close in the answer: %v); want %v", closed, res.Close, c.closes)
			}
		})
	}
}
