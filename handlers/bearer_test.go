package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/go-jose/go-jose/v4"

	"usersd/auth"
	"usersd/auth/oidctest"
	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/internal/apitest"
)

const bearerAudience = "usersd-test"

// startBearerService serves the users with the keys of the scopes tests and bearer tokens of iss.
func startBearerService(t *testing.T, iss *oidctest.Issuer, refetchEvery time.Duration) *testServer {
	t.Helper()
	return startServerWith(t, Config{Keys: scopesTestKeySet(t), Background: t.Context(),
		Bearer: &auth.BearerConfig{Issuer: iss.URL, Audience: bearerAudience, RefetchEvery: refetchEvery}})
}

// createWithToken creates a user over REST with Authorization: Bearer token.
func createWithToken(t *testing.T, s *testServer, token, name string) apitest.Response {
	t.Helper()
	return s.Do(t, apitest.HTTP1Client, apitest.Request{Method: "POST", Path: "/users", Body: fmt.Sprintf(`{"name":%q}`, name),
		Header: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + token}})
}

// waitForKeys waits until the service has the issuer's keys: a valid token is then accepted.
func waitForKeys(t *testing.T, s *testServer, iss *oidctest.Issuer) {
	t.Helper()
	token := iss.Sign(t, "rs256", iss.Claims(bearerAudience, "probe", "users.write"))
	waitForCreateStatus(t, s, token, http.StatusServiceUnavailable, http.StatusCreated, "a valid token, until the keys load")
}

// waitForCreateStatus sends creates with token until one is answered want, for at most 10 s;
// every answer before it must be meanwhile.
func waitForCreateStatus(t *testing.T, s *testServer, token string, meanwhile, want int, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res := createWithToken(t, s, token, "Probe")
		if res.Status == want {
			return
		}
		if res.Status != meanwhile || time.Now().After(deadline) {
			t.Fatalf("%s: %d %s, want %d until it is %d, within 10 s", what, res.Status, res.Body, meanwhile, want)
		}
	}
}

// TestBearerTokensAreVerifiedAsSection13Says sends a create with each kind of token, good and
// forged, and checks the answer: 201 for a valid token of each algorithm; 401 with
// WWW-Authenticate: Bearer error="invalid_token" for every forgery and every token out of its
// time, issuer or audience; 403 with error="insufficient_scope" for a valid token without
// users.write. Nothing is created by a refused token.
func TestBearerTokensAreVerifiedAsSection13Says(t *testing.T) {
	iss := oidctest.Start(t)
	s := startBearerService(t, iss, time.Hour)
	waitForKeys(t, s, iss)
	valid := func(change func(map[string]any)) map[string]any {
		c := iss.Claims(bearerAudience, "alice", "openid users.write")
		if change != nil {
			change(c)
		}
		return c
	}
	good := iss.Sign(t, "rs256", valid(nil))
	now := time.Now()
	for _, c := range []struct {
		name   string
		token  string
		status int
	}{
		{"RS256", good, http.StatusCreated},
		{"ES256", iss.Sign(t, "es256", valid(nil)), http.StatusCreated},
		{"EdDSA", iss.Sign(t, "eddsa", valid(nil)), http.StatusCreated},
		{"scopes in scp, as an array", iss.Sign(t, "es256", valid(func(c map[string]any) { delete(c, "scope"); c["scp"] = []string{"users.write"} })), http.StatusCreated},
		{"no kid, one of the issuer's keys", iss.SignWithoutKeyID(t, "eddsa", valid(nil)), http.StatusCreated},
		{"expired 10 s ago, within the 30 s leeway", iss.Sign(t, "rs256", valid(func(c map[string]any) { c["exp"] = now.Add(-10 * time.Second).Unix() })), http.StatusCreated},
		{"expired", iss.Sign(t, "rs256", valid(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })), http.StatusUnauthorized},
		{"not valid yet", iss.Sign(t, "rs256", valid(func(c map[string]any) { c["nbf"] = now.Add(5 * time.Minute).Unix() })), http.StatusUnauthorized},
		{"no expiry", iss.Sign(t, "rs256", valid(func(c map[string]any) { delete(c, "exp") })), http.StatusUnauthorized},
		{"wrong issuer", iss.Sign(t, "rs256", valid(func(c map[string]any) { c["iss"] = "https://elsewhere.example.com" })), http.StatusUnauthorized},
		{"wrong audience", iss.Sign(t, "rs256", valid(func(c map[string]any) { c["aud"] = "another-service" })), http.StatusUnauthorized},
		{"no subject", iss.Sign(t, "rs256", valid(func(c map[string]any) { delete(c, "sub") })), http.StatusUnauthorized},
		{"alg none", oidctest.Unsigned(t, valid(nil)), http.StatusUnauthorized},
		{"an HMAC signed with the public key", iss.HMACWithPublicKey(t, valid(nil)), http.StatusUnauthorized},
		{"a kid the issuer does not have", func() string {
			iss.AddKey(t, "unpublished", jose.ES256, false)
			return iss.Sign(t, "unpublished", valid(nil))
		}(), http.StatusUnauthorized},
		{"a tampered payload", oidctest.Tampered(t, good, valid(func(c map[string]any) { c["sub"] = "mallory" })), http.StatusUnauthorized},
		{"not a JWT", "not-a-jwt", http.StatusUnauthorized},
		{"a valid token without users.write", iss.Sign(t, "rs256", valid(func(c map[string]any) { c["scope"] = "openid users.read" })), http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := apitest.UserCount(t, s.BaseURL)
			res := createWithToken(t, s, c.token, "Bearer "+c.name)
			if res.Status != c.status {
				t.Fatalf("%d %s, want %d", res.Status, res.Body, c.status)
			}
			challenge := res.Header.Get("WWW-Authenticate")
			switch c.status {
			case http.StatusCreated:
				return
			case http.StatusUnauthorized:
				if challenge != `Bearer error="invalid_token"` {
					t.Errorf("WWW-Authenticate %q, want Bearer error=\"invalid_token\"", challenge)
				}
			case http.StatusForbidden:
				if challenge != `Bearer error="insufficient_scope", scope="users.write"` {
					t.Errorf("WWW-Authenticate %q, want the insufficient_scope challenge", challenge)
				}
			}
			if msg := res.ErrorMessage(t); strings.Contains(msg, c.token) {
				t.Errorf("the error %q shows the token", msg)
			}
			if after := apitest.UserCount(t, s.BaseURL); after != before {
				t.Errorf("a refused token changed the users: %s, then %s", before, after)
			}
		})
	}

	for _, name := range []string{"access_token", "access%5Ftoken", "%61ccess_token"} {
		t.Run("a token in the query string as "+name, func(t *testing.T) {
			res := s.Do(t, apitest.HTTP1Client, apitest.Request{Method: "GET", Path: "/users?" + name + "=" + good})
			if res.Status != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != `Bearer error="invalid_request"` {
				t.Fatalf("%d %s (WWW-Authenticate %q), want 401 invalid_request", res.Status, res.Body, res.Header.Get("WWW-Authenticate"))
			}
		})
	}
	t.Run("a key and a token at once", func(t *testing.T) {
		res := s.Do(t, apitest.HTTP1Client, apitest.Request{Method: "POST", Path: "/users", Body: `{"name":"Two"}`,
			Header: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + good, APIKeyHeader: scopesFullKey}})
		if res.Status != http.StatusUnauthorized {
			t.Fatalf("%d %s, want 401", res.Status, res.Body)
		}
	})
}

// bearerClient is a generated client that sends token as a bearer token on every call.
func bearerClient(s *testServer, p apitest.RPCProtocol, token string) usersv1connect.UsersClient {
	opts := append([]connect.ClientOption{}, p.Opts...)
	opts = append(opts, connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+token)
			return next(ctx, req)
		}
	})))
	return usersv1connect.NewUsersClient(apitest.H2CClient, s.BaseURL, opts...)
}

// TestBearerTokensOnEveryRPCProtocol: over gRPC, gRPC-Web and Connect, a valid token writes, a
// forged one is unauthenticated, one without the scope permission_denied; and the change log
// records the token's subject as the change's actor.
func TestBearerTokensOnEveryRPCProtocol(t *testing.T) {
	iss := oidctest.Start(t)
	s := startBearerService(t, iss, time.Hour)
	waitForKeys(t, s, iss)
	writer := iss.Sign(t, "es256", iss.Claims(bearerAudience, "service-account-7", "users.write users.read"))
	reader := iss.Sign(t, "eddsa", iss.Claims(bearerAudience, "dashboard-sa", "users.read"))
	forged := oidctest.Unsigned(t, iss.Claims(bearerAudience, "service-account-7", "users.write"))
	watch, err := apitest.OpenWatchWithKey(t, s.Server, apitest.WatchProtocols()[0], scopesReaderKey, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			create := func(token string) error {
				_, err := bearerClient(s, p, token).CreateUser(t.Context(), &usersv1.CreateUserRequest{User: &usersv1.User{Name: "By " + p.Name}})
				return err
			}
			if err := create(writer); err != nil {
				t.Fatalf("a valid token: %v", err)
			}
			if e := watch.Next(t, 10*time.Second); e.GetActor() != "service-account-7" {
				t.Errorf("the change's actor %q, want the token's subject", e.GetActor())
			}
			if err := create(forged); connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Errorf("an unsigned token: %v, want unauthenticated", err)
			}
			if err := create(reader); connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Errorf("a token without users.write: %v, want permission_denied", err)
			}
		})
	}
}

// TestAKeyRotatedInIsFetchedAtMostOnceARefetchInterval: a token of a key the service has not seen
// makes it fetch the keys again, but no more than once per RefetchEvery however many such tokens
// come; a key the issuer rotates in is accepted after that.
func TestAKeyRotatedInIsFetchedAtMostOnceARefetchInterval(t *testing.T) {
	iss := oidctest.Start(t)
	const refetchEvery = time.Second
	s := startBearerService(t, iss, refetchEvery)
	waitForKeys(t, s, iss)
	iss.AddKey(t, "next", jose.RS256, false)
	token := iss.Sign(t, "next", iss.Claims(bearerAudience, "alice", "users.write"))
	fetches := iss.KeySetFetches.Load()
	for range 50 {
		if res := createWithToken(t, s, token, "Too early"); res.Status != http.StatusUnauthorized {
			t.Fatalf("a token of an unpublished key: %d %s", res.Status, res.Body)
		}
	}
	if n := iss.KeySetFetches.Load() - fetches; n > 1 {
		t.Fatalf("50 tokens of an unknown key made %d fetches of the keys, want at most 1 a second", n)
	}
	iss.Publish("next", true)
	time.Sleep(refetchEvery)
	if res := createWithToken(t, s, token, "Rotated in"); res.Status != http.StatusCreated {
		t.Fatalf("a token of the key rotated in: %d %s", res.Status, res.Body)
	}
}

// TestTheServiceStartsWhileTheIssuerIsDown: bearer tokens are 503 unavailable until the issuer
// answers, API keys work all along, and tokens are accepted once it does.
func TestTheServiceStartsWhileTheIssuerIsDown(t *testing.T) {
	iss := oidctest.Start(t)
	iss.SetDown(true)
	s := startBearerService(t, iss, time.Hour)
	token := iss.Sign(t, "rs256", iss.Claims(bearerAudience, "alice", "users.write"))
	res := createWithToken(t, s, token, "Early")
	if res.Status != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("a token before the keys loaded: %d %s, want 503 with Retry-After", res.Status, res.Body)
	}
	if res := s.Do(t, apitest.HTTP1Client, apitest.Request{Method: "POST", Path: "/users", Body: `{"name":"Keyed"}`,
		Header: map[string]string{"Content-Type": "application/json", APIKeyHeader: scopesFullKey}}); res.Status != http.StatusCreated {
		t.Fatalf("an API key while the issuer is down: %d %s", res.Status, res.Body)
	}
	iss.SetDown(false)
	waitForKeys(t, s, iss)
}

// TestAWatchEndsWhenItsTokenExpires: a watch opened with a bearer token ends, unauthenticated,
// when the token expires (its exp and the 30 s of leeway), over SSE and over Connect.
func TestAWatchEndsWhenItsTokenExpires(t *testing.T) {
	iss := oidctest.Start(t)
	s := startBearerService(t, iss, time.Hour)
	waitForKeys(t, s, iss)
	// A token accepted for 5 to 6 s more (once expired, a public read would be served as to anyone).
	shortLived := func() string {
		claims := iss.Claims(bearerAudience, "short-lived", "users.read")
		claims["exp"] = time.Now().Add(-auth.BearerLeeway + 6*time.Second).Unix()
		return iss.Sign(t, "rs256", claims)
	}

	t.Run("SSE", func(t *testing.T) {
		token := shortLived()
		res, err := apitest.OpenEventStream(t.Context(), s.Server, apitest.HTTP1Client, -1, "", http.Header{"Authorization": {"Bearer " + token}})
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		ended := make(chan error, 1)
		go func() { ended <- apitest.ReadEventStream(res.Body, make(chan apitest.WatchedEvent, 1000)) }()
		select {
		case err := <-ended:
			if err == nil || !strings.Contains(err.Error(), "expired") {
				t.Fatalf("the stream ended with %v, want an error event saying the credential expired", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the watch still runs 20 s after it opened with a token that had 6 s left")
		}
	})
	t.Run("Connect", func(t *testing.T) {
		token := shortLived()
		ctx, info := connect.NewClientContext(t.Context())
		info.RequestHeader().Set("Authorization", "Bearer "+token)
		stream, err := usersv1connect.NewUsersClient(apitest.H2CClient, s.BaseURL).WatchUsers(ctx, &usersv1.WatchUsersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close()
		done := make(chan error, 1)
		go func() {
			for stream.Receive() {
			}
			done <- stream.Err()
		}()
		select {
		case err := <-done:
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("the stream ended with %v, want unauthenticated", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the watch still runs 20 s after it opened with a token that had 6 s left")
		}
	})
}

// TestATokenOfAWithdrawnKeyStopsBeingAccepted: a token verified once (and so cached) is refused
// once the issuer withdraws its key and the service has fetched the keys again.
func TestATokenOfAWithdrawnKeyStopsBeingAccepted(t *testing.T) {
	iss := oidctest.Start(t)
	iss.AddKey(t, "leaving", jose.ES256, true)
	s := startServerWith(t, Config{Keys: scopesTestKeySet(t), Background: t.Context(),
		Bearer: &auth.BearerConfig{Issuer: iss.URL, Audience: bearerAudience, RefreshEvery: 200 * time.Millisecond}})
	waitForKeys(t, s, iss)
	token := iss.Sign(t, "leaving", iss.Claims(bearerAudience, "alice", "users.write"))
	if res := createWithToken(t, s, token, "Before"); res.Status != http.StatusCreated {
		t.Fatalf("a token of a published key: %d %s", res.Status, res.Body)
	}
	iss.Publish("leaving", false)
	waitForCreateStatus(t, s, token, http.StatusCreated, http.StatusUnauthorized, "a token of a withdrawn key, once the keys are fetched again")
}
