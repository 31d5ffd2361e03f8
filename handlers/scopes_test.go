package handlers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"usersd/auth"
	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/scim"
	"usersd/store/sqlstore"
)

// The keys of the scopes tests: one for each set of scopes, and one that is not valid.
const (
	scopesFullKey   = "scopes-test-full-key-0123456789"
	scopesReaderKey = "scopes-test-reader-key-0123456789"
	scopesWriterKey = "scopes-test-writer-key-0123456789"
	scopesWrongKey  = "scopes-test-wrong-key-0123456789"
)

// scopesTestKeys is the keys file of the scopes tests.
var scopesTestKeys = []string{
	scopesFullKey + " name=full",
	scopesReaderKey + " name=dashboard scopes=users.read",
	scopesWriterKey + " name=importer scopes=users.write",
}

// scopesTestKeySet is the set of scopesTestKeys.
func scopesTestKeySet(t testing.TB) *auth.APIKeys {
	t.Helper()
	keys := &auth.APIKeys{}
	for _, line := range scopesTestKeys {
		key, err := auth.ParseAPIKey(line)
		if err != nil {
			t.Fatal(err)
		}
		if err := keys.Add(key); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// checkOutcome is what the credential check does with a request.
type checkOutcome string

const (
	passes          checkOutcome = "passes the check"
	unauthenticated checkOutcome = "401 unauthenticated"
	forbidden       checkOutcome = "403 permission_denied"
)

// expectedCheck is the rule of docs/ACCESS.md#callers-and-scopes as this test reads it, written apart from the
// authorizer: a route without a scope answers anyone, and so does a public route's read while
// reads are public, whatever credential it carries; otherwise a credential must be sent, be valid
// and hold the route's scope.
func expectedCheck(r route, key string, privateReads bool) checkOutcome {
	if r.scope == 0 || r.access == accessPublic && !privateReads {
		return passes
	}
	var held auth.Scopes
	switch key {
	case "":
		return unauthenticated
	case scopesFullKey:
		held = auth.ScopeRead | auth.ScopeWrite
	case scopesReaderKey:
		held = auth.ScopeRead
	case scopesWriterKey:
		held = auth.ScopeWrite
	default:
		return unauthenticated
	}
	if held&r.scope != r.scope {
		return forbidden
	}
	return passes
}

// TestEveryRouteHoldsItsScope drives every route of the table that needs a scope, and a few that
// need none, with no key, a wrong key, and keys holding users.read, users.write or both, over
// REST and every RPC protocol (the watch streams included), with reads public and with reads
// private. Each answer must be what expectedCheck says: 401 with {"error"} / unauthenticated,
// 403 with {"error"} / permission_denied, or anything else for a request that passes the check.
func TestEveryRouteHoldsItsScope(t *testing.T) {
	for _, privateReads := range []bool{false, true} {
		t.Run(fmt.Sprintf("private reads %v", privateReads), func(t *testing.T) {
			svc, srv := startScopesTestService(t, privateReads)
			admin := &routeClient{baseURL: srv.URL, http: srv.Client(), key: scopesFullKey}
			h2c := h2cClient()
			t.Cleanup(h2c.CloseIdleConnections)

			counts := map[checkOutcome]int{}
			for _, r := range svc.routes {
				if r.scope == 0 && !strings.HasPrefix(r.pattern, "GET /health") && r.pattern != "/grpc.health.v1.Health/Check" {
					continue // the service's own routes: /health and gRPC health stand for them
				}
				for _, key := range []string{"", scopesWrongKey, scopesReaderKey, scopesWriterKey, scopesFullKey} {
					want := expectedCheck(r, key, privateReads)
					if m, ok := rpcMethodOf(r.pattern); ok {
						for _, p := range rpcTestProtocols {
							id := admin.createUser(t, "Scoped")
							var err error
							if m.IsStreamingServer() {
								err = watchRPC(h2c, srv.URL, p.opts, key)
							} else {
								err = callRPC(t, h2c, srv.URL, r.pattern, m, p.opts, key, id)
							}
							if got := checkOfRPC(err); got != want {
								t.Errorf("%s over %s with key %q: %s (%v), want %s", r.pattern, p.name, key, got, err, want)
							}
							counts[want]++
						}
						continue
					}
					id := admin.createUser(t, "Scoped")
					method, path, body := restRequestFor(r.pattern, id)
					status, errorBody := scopedRESTStatus(t, srv.Client(), srv.URL, method, path, body, key, r.stream)
					if got := checkOfStatus(status); got != want {
						t.Errorf("%s %s with key %q: %d %s, want %s", method, path, key, status, errorBody, want)
					}
					if want != passes && strings.HasPrefix(path, scim.Prefix+"/") {
						if !isSCIMError([]byte(errorBody), status) {
							t.Errorf("%s %s with key %q: body %s, want SCIM's error schema", method, path, key, errorBody)
						}
					} else if want != passes && !strings.HasPrefix(errorBody, `{"error":`) {
						t.Errorf("%s %s with key %q: body %s, want {\"error\": ...}", method, path, key, errorBody)
					}
					counts[want]++
				}
			}
			// A short table would pass everything: each checkOutcome must have been seen many times.
			for _, o := range []checkOutcome{passes, unauthenticated, forbidden} {
				if counts[o] < 20 {
					t.Errorf("%s was expected of %d requests only; the table has %d routes", o, counts[o], len(svc.routes))
				}
			}
		})
	}
}

// TestAReadOnlyKeyChangesNothing: a key that holds only users.read reads users but changes none,
// on REST and RPC, and the refusal names the scope.
func TestAReadOnlyKeyChangesNothing(t *testing.T) {
	_, srv := startScopesTestService(t, false)
	admin := &routeClient{baseURL: srv.URL, http: srv.Client(), key: scopesFullKey}
	id := admin.createUser(t, "Kept")
	reader := &routeClient{baseURL: srv.URL, http: srv.Client(), key: scopesReaderKey}
	before := admin.snapshot(t, id)
	res := reader.rest(t, http.MethodPatch, fmt.Sprintf("/users/%d", id), `{"name":"Changed"}`)
	if res.status != http.StatusForbidden || !strings.Contains(string(res.body), "users.write") || !strings.Contains(string(res.body), "dashboard") {
		t.Errorf("PATCH with the read-only key: %d %s, want 403 naming the key and users.write", res.status, res.body)
	}
	if strings.Contains(string(res.body), scopesReaderKey) {
		t.Errorf("the refusal %s shows the key", res.body)
	}
	client := usersv1connect.NewUsersClient(h2cClient(), srv.URL, connect.WithGRPC())
	ctx, info := connect.NewClientContext(t.Context())
	info.RequestHeader().Set(APIKeyHeader, scopesReaderKey)
	if _, err := client.DeleteUser(ctx, &usersv1.DeleteUserRequest{Id: int32(id)}); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("DeleteUser over gRPC with the read-only key: %v, want permission_denied", err)
	}
	if got := reader.rest(t, http.MethodGet, fmt.Sprintf("/users/%d", id), ""); got.status != http.StatusOK {
		t.Errorf("GET with the read-only key: %d %s", got.status, got.body)
	}
	if after := admin.snapshot(t, id); after != before {
		t.Errorf("the read-only key changed the store:\nbefore %s\nafter  %s", before, after)
	}
}

func startScopesTestService(t *testing.T, privateReads bool) (*Service, *httptest.Server) {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := New(Config{Store: st, Keys: scopesTestKeySet(t), PrivateReads: privateReads, Logger: slog.New(slog.DiscardHandler),
		WatchHeartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.EndWatches)
	return svc, startH2C(t, svc)
}

// watchRPC opens WatchUsers with key and reads its first message: nil once one arrives.
func watchRPC(client *http.Client, baseURL string, opts []connect.ClientOption, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx, info := connect.NewClientContext(ctx)
	if key != "" {
		info.RequestHeader().Set(APIKeyHeader, key)
	}
	stream, err := usersv1connect.NewUsersClient(client, baseURL, opts...).WatchUsers(ctx, &usersv1.WatchUsersRequest{})
	if err != nil {
		return err
	}
	defer stream.Close()
	if !stream.Receive() {
		return stream.Err()
	}
	return nil
}

// scopedRESTStatus sends a REST request with key and returns its status and, unless the route streams
// and was let through, its body.
func scopedRESTStatus(t *testing.T, client *http.Client, baseURL, method, path, body, key string, stream bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, baseURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(APIKeyHeader, key)
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	if stream && res.StatusCode == http.StatusOK {
		return res.StatusCode, "" // a watch that was let through: it would not end
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return res.StatusCode, strings.TrimSpace(string(b))
}

func checkOfStatus(status int) checkOutcome {
	switch status {
	case http.StatusUnauthorized:
		return unauthenticated
	case http.StatusForbidden:
		return forbidden
	}
	return passes
}

func checkOfRPC(err error) checkOutcome {
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated:
		return unauthenticated
	case connect.CodePermissionDenied:
		return forbidden
	}
	return passes
}
