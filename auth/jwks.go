// The token issuer's keys (JWKS): fetched in the background from the start, so that the service
// starts while the issuer is down, fetched again now and then so that a withdrawn key stops being
// accepted, and at once (at most once a RefetchEvery) for a token of a key they lack.
package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// errKeysNotLoaded refuses bearer tokens until the issuer's keys have been fetched once.
var errKeysNotLoaded = errors.New("the token issuer's keys are not loaded yet: the issuer has not answered since the service started")

// keyFetch is a fetch of the keys, which every caller that wants one while it runs waits for.
type keyFetch struct {
	done chan struct{} // closed when it ends
	err  error         // what it ended with, once done is closed
}

// newIssuerClient returns the client that fetches the discovery document and the keys.
func newIssuerClient() *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		// A redirect is held to the issuer's rule too: keys fetched in the clear could be anyone's.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			return checkIssuerURL(req.URL.String())
		},
	}
}

// checkIssuerURL accepts an https URL, or an http one on the loopback interface (an issuer on the
// same machine, as in tests): keys fetched in the clear from elsewhere could be anyone's.
func checkIssuerURL(issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("the issuer %q is not a URL such as https://login.example.com/realms/main", issuer)
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopbackHost(u.Hostname()):
		return nil
	}
	return fmt.Errorf("the issuer %q must be an https:// URL (http:// only on the loopback interface)", issuer)
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// keepKeys fetches the keys until it has them, retrying with a growing wait, then fetches them
// again every RefreshEvery. A failed refresh keeps the keys already fetched.
func (v *bearerVerifier) keepKeys(ctx context.Context) {
	wait := time.Second
	for {
		err := v.fetch(ctx, false)
		switch {
		case err == nil:
			wait = v.config.RefreshEvery
		case ctx.Err() != nil:
			return
		default:
			v.logger.Warn("the token issuer's keys could not be fetched; bearer tokens are checked against the keys fetched before, if any", "issuer", v.config.Issuer, "error", err)
			if v.loaded() {
				wait = min(v.config.RefreshEvery, time.Minute)
			} else {
				wait = min(wait*2, 30*time.Second)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (v *bearerVerifier) loaded() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.keys != nil
}

// fetch fetches the keys once, or waits for the fetch under way and returns what it ended with.
// With onlyIfDue, it fetches only if the last fetch began RefetchEvery ago or more, and otherwise
// returns at once. The fetch itself is not the caller's: it runs on its own, for up to 10 s, so
// that a client that leaves cannot cancel it for everyone waiting.
func (v *bearerVerifier) fetch(ctx context.Context, onlyIfDue bool) error {
	v.mu.Lock()
	f := v.fetching
	if f == nil {
		if onlyIfDue && time.Since(v.lastFetched) < v.config.RefetchEvery {
			v.mu.Unlock()
			return nil
		}
		f = &keyFetch{done: make(chan struct{})}
		v.fetching, v.lastFetched = f, time.Now()
		go v.run(f)
	}
	v.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run downloads the keys for f and, if that works, makes them the keys.
func (v *bearerVerifier) run(f *keyFetch) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err := v.download(ctx)
	v.mu.Lock()
	defer v.mu.Unlock()
	if err == nil {
		v.keys = keys
		v.generation++
		v.verified, v.cachedBytes = map[string]verifiedToken{}, 0 // a withdrawn key's tokens are verified again
	}
	f.err = err
	v.fetching = nil
	close(f.done)
}

// download reads the discovery document and the key set it names.
func (v *bearerVerifier) download(ctx context.Context) (*jose.JSONWebKeySet, error) {
	var discovery struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := v.getJSON(ctx, strings.TrimSuffix(v.config.Issuer, "/")+"/.well-known/openid-configuration", &discovery); err != nil {
		return nil, fmt.Errorf("discovery document: %w", err)
	}
	if discovery.Issuer != v.config.Issuer {
		return nil, fmt.Errorf("the discovery document names the issuer %q, not %q", discovery.Issuer, v.config.Issuer)
	}
	if err := checkIssuerURL(discovery.JWKSURI); err != nil {
		return nil, fmt.Errorf("jwks_uri: %w", err)
	}
	var keys jose.JSONWebKeySet
	if err := v.getJSON(ctx, discovery.JWKSURI, &keys); err != nil {
		return nil, fmt.Errorf("key set %s: %w", discovery.JWKSURI, err)
	}
	// Only public signing keys: a symmetric key in the set would make an HMAC token verifiable.
	usable := keys.Keys[:0]
	for _, k := range keys.Keys {
		if k.Valid() && k.IsPublic() && (k.Use == "" || k.Use == "sig") {
			usable = append(usable, k)
		}
	}
	if len(usable) == 0 {
		return nil, fmt.Errorf("the key set %s holds no public signing key", discovery.JWKSURI)
	}
	keys.Keys = usable
	return &keys, nil
}

func (v *bearerVerifier) getJSON(ctx context.Context, target string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	res, err := v.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", target, res.Status)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxKeySetBytes+1))
	if err != nil {
		return err
	}
	if len(body) > maxKeySetBytes {
		return fmt.Errorf("GET %s: the answer is over %d bytes", target, maxKeySetBytes)
	}
	return json.Unmarshal(body, into)
}

// refetchForUnknownKey fetches the keys again if the last fetch began RefetchEvery ago or more,
// and returns the keys then current and their generation.
func (v *bearerVerifier) refetchForUnknownKey(ctx context.Context) (*jose.JSONWebKeySet, int) {
	if err := v.fetch(ctx, true); err != nil {
		v.logger.Warn("the token issuer's keys could not be fetched for a token of an unknown key", "issuer", v.config.Issuer, "error", err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.keys, v.generation
}
