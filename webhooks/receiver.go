package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// Limits of a delivery, as the contract states them (docs/WEBHOOKS.md).
const (
	// deliveryTimeout bounds one attempt, from the connection to the end of the answer.
	deliveryTimeout = 10 * time.Second
	// answerLimit is how much of a receiver's answer is read: its status is what counts.
	answerLimit = 64 << 10
	// maxURLLength bounds a subscription's URL.
	maxURLLength = 2048
)

// Policy says which receivers may be reached: https on public addresses, unless the server allows
// more (for tests, or receivers on the server's own network).
type Policy struct {
	// AllowHTTP allows http URLs on loopback hosts (-webhooks-allow-http).
	AllowHTTP bool
	// AllowPrivate allows private, loopback, link-local and unique-local addresses
	// (-webhooks-allow-private).
	AllowPrivate bool
}

// errRefusedAddress marks a receiver's address that the policy refuses.
var errRefusedAddress = errors.New("the address is private, loopback or link-local, which this server does not send to (-webhooks-allow-private)")

// checkURL checks a subscription's URL and resolves its host, refusing what the policy refuses.
// The words are for the caller who gave the URL.
func (p Policy) checkURL(ctx context.Context, raw string) error {
	if len(raw) > maxURLLength {
		return fmt.Errorf("url is %d characters long; at most %d are allowed", len(raw), maxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("url must be an absolute https URL such as https://example.com/hooks")
	}
	if u.User != nil {
		return fmt.Errorf("url must not carry a user or password: the signature is the receiver's proof")
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return fmt.Errorf("url must not have a fragment")
	}
	host := u.Hostname()
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && p.AllowHTTP && isLoopbackHost(host):
	case u.Scheme == "http" && p.AllowHTTP:
		return fmt.Errorf("url must be https: http is allowed on loopback hosts alone")
	default:
		return fmt.Errorf("url must be https, not %s", u.Scheme)
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("url's host %s does not resolve", host)
	}
	for _, a := range addrs {
		if err := p.checkAddress(a); err != nil {
			return fmt.Errorf("url's host %s resolves to %s: %w", host, a.Unmap(), err)
		}
	}
	return nil
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// checkAddress refuses an address in a range that leads into the server's own network, unless the
// policy allows private addresses.
func (p Policy) checkAddress(a netip.Addr) error {
	a = a.Unmap()
	if p.AllowPrivate {
		return nil
	}
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() || sharedAddressSpace.Contains(a) {
		return errRefusedAddress
	}
	return nil
}

// sharedAddressSpace is carrier-grade NAT (RFC 6598): private to a provider's network.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// maxIdlePerHost bounds the connections kept open to one receiving host between deliveries.
const maxIdlePerHost = 256

// newClient is the HTTP client of deliveries: every connection is checked against the policy after
// DNS (so a name that resolves to a private address later is refused then), no proxy from the
// environment (it would hide the address), no redirect followed, and a deadline on each attempt.
func newClient(p Policy) *http.Client {
	dialer := &net.Dialer{
		Timeout: deliveryTimeout,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("receiver address %q: %w", address, err)
			}
			return p.checkAddress(ap.Addr())
		},
	}
	transport := &http.Transport{
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   deliveryTimeout,
		ResponseHeaderTimeout: deliveryTimeout,
		// Each subscription sends one change at a time, so a host that many subscriptions name
		// needs as many connections: with fewer kept idle, each delivery would dial anew.
		MaxIdleConnsPerHost: maxIdlePerHost,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   deliveryTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a 3xx is an answer: not delivered
		},
	}
}
