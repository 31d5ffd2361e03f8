// usersd healthcheck: asks a running usersd whether it is ready, for a container's HEALTHCHECK. The
// image has no shell and no curl (a distroless base), so the binary asks itself.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// runHealthcheck asks GET /readyz of the server at -addr (by default the address the server itself
// takes from USERS_ADDR, on loopback when it names no host) and returns nil only for a 200.
func runHealthcheck(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("usersd healthcheck", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	defaultAddr := getenv("USERS_ADDR")
	if defaultAddr == "" {
		defaultAddr = ":8080"
	}
	addr := fs.String("addr", defaultAddr, "the address the server listens on (env USERS_ADDR)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	useTLS := fs.Bool("tls", getenv("USERS_TLS_CERT") != "", "ask over HTTPS, as a server with -tls-cert serves (the default when USERS_TLS_CERT is set)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stdout, "Usage: usersd healthcheck [-addr ADDR] [-tls] [-timeout 3s]\n\nExits 0 when the server at ADDR answers GET /readyz with 200 (ready to serve), 1 otherwise.\n\nFlags:")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil
	} else if err != nil {
		return fmt.Errorf("usersd healthcheck: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("usersd healthcheck: unexpected arguments %q", fs.Args())
	}
	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("usersd healthcheck: -addr %q: %w", *addr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1" // a server on every interface answers on loopback
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, port) + "/readyz"
	client := http.DefaultClient
	if *useTLS {
		url = "https://" + net.JoinHostPort(host, port) + "/readyz"
		// On loopback the server's certificate names its public host, not the address asked, and
		// no one stands between the two: it is not checked there. Elsewhere it is, as any client's.
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("usersd healthcheck: %w", err)
	}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("usersd healthcheck: %w", err)
	}
	defer res.Body.Close()
	io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("usersd healthcheck: %s answered %s: not ready", url, res.Status)
	}
	fmt.Fprintln(stdout, "ready")
	return nil
}
