package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/internal/proctest"
	"usersd/store/storetest"
)

// TestPostgresOutageIsUnavailableAndHeals puts a proxy between usersd and PostgreSQL and cuts it:
// while the database cannot be reached, every request that needs it is 503 (RPC unavailable) with
// no driver detail, /health says {"ok": false}, gRPC health says NOT_SERVING; once the proxy lets
// connections through again, usersd recovers by itself, without a restart.
func TestPostgresOutageIsUnavailableAndHeals(t *testing.T) {
	dsn := storetest.PostgresSchema(t)
	proxy := proctest.StartFaultProxy(t, dsn)
	s := startServerOn(t, proxy.DSN, nil)
	id := apitest.IDOf(t, s.CreateUser(t, "before the outage", ""))
	path := fmt.Sprintf("/users/%d", id)
	rpc := s.RPCClient(apitest.RPCProtocolNamed(t, "gRPC"), apitest.Key)

	proxy.Cut()
	for _, req := range []request{
		{Method: "GET", Path: path},
		{Method: "GET", Path: "/users"},
		{Method: "POST", Path: "/users", Header: apitest.JSONBody, Body: `{"name":"during the outage"}`, Key: true},
		{Method: "PATCH", Path: path, Header: apitest.JSONBody, Body: `{"role":"x"}`, Key: true},
	} {
		res := s.Do(t, apitest.HTTP1Client, req)
		if res.Status != http.StatusServiceUnavailable {
			t.Errorf("%s %s during the outage: %d %s, want 503", req.Method, req.Path, res.Status, res.Body)
			continue
		}
		if msg := res.ErrorMessage(t); msg != "the service is temporarily unavailable; retry later" {
			t.Errorf("%s %s during the outage says %q", req.Method, req.Path, msg)
		}
	}
	_, err := rpc.GetUser(t.Context(), &usersv1.GetUserRequest{Id: int32(id)})
	apitest.RPCWantCode(t, err, connect.CodeUnavailable)
	if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/health"}); res.Status != http.StatusServiceUnavailable || string(res.Body) != `{"ok":false}` {
		t.Errorf("/health during the outage: %d %s, want 503 {\"ok\":false}", res.Status, res.Body)
	}
	if status := grpcHealthStatus(t, s); status != 2 {
		t.Errorf("gRPC health during the outage: %d, want NOT_SERVING (2)", status)
	}

	proxy.Restore()
	deadline := time.Now().Add(15 * time.Second)
	for s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/health"}).Status != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("/health did not recover within 15s of the database coming back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status := grpcHealthStatus(t, s); status != 1 {
		t.Errorf("gRPC health after the outage: %d, want SERVING (1)", status)
	}
	if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: path}); res.Status != http.StatusOK {
		t.Errorf("read after the outage: %d %s", res.Status, res.Body)
	}
	if _, err := rpc.GetUser(t.Context(), &usersv1.GetUserRequest{Id: int32(id)}); err != nil {
		t.Errorf("RPC read after the outage: %v", err)
	}
	s.CreateUser(t, "after the outage", "")
	if n := apitest.UserCount(t, s.BaseURL); n != "2" {
		t.Errorf("%s users after the outage, want 2: a write made during it was kept, or one after it lost", n)
	}
}

// grpcHealthStatus asks gRPC health about the whole server and returns the status number.
func grpcHealthStatus(t *testing.T, s *testServer) uint64 {
	t.Helper()
	return apitest.GRPCHealthStatus(t, s.BaseURL, "")
}

// TestTheDatabasePasswordNeverReachesTheLog starts usersd with a password in the database URL, in
// both places a URL can hold one, and looks for it in every log line. (The test server trusts local
// connections, so any password is accepted.)
func TestTheDatabasePasswordNeverReachesTheLog(t *testing.T) {
	const password = "pw-that-must-not-leak"
	dsn := storetest.PostgresSchema(t)
	withParam := storetest.WithURLParam(t, dsn, "password", password)
	u, _ := url.Parse(dsn)
	u.User = url.UserPassword(u.User.Username(), password)
	for _, dsn := range []string{withParam, u.String()} {
		s := startServerOn(t, dsn, nil)
		s.CreateUser(t, "logged", "")
		s.stop()
		if strings.Contains(s.logs.String(), password) {
			t.Fatalf("the log shows the database password:\n%s", s.logs)
		}
		if len(s.logs.Entries(map[string]any{"msg": "listening", "backend": "postgresql"})) != 1 {
			t.Fatalf("no listening line naming the backend in the log:\n%s", s.logs)
		}
	}
	// The start waits for an unreachable database, logging each attempt, for -db-wait.
	var log strings.Builder
	err := run(t.Context(), nil, []string{"-addr", "127.0.0.1:0", "-db-wait", "1s", "-db", "postgres://user:" + password + "@127.0.0.1:1/none"}, func(name string) (string, bool) {
		if name == "USERS_API_KEYS" {
			return apitest.Key, true
		}
		return "", false
	}, &log, io.Discard)
	if err == nil || strings.Contains(err.Error(), password) || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Fatalf("start on an unreachable database: %v; want an error that names PostgreSQL and hides the password", err)
	}
	if strings.Contains(log.String(), password) || !strings.Contains(log.String(), "waiting for the database") {
		t.Fatalf("the log of a start on an unreachable database shows the password, or no wait:\n%s", log.String())
	}
}

// TestTextNoUserCanHoldIsAClientErrorOnPostgres: PostgreSQL refuses text with a NUL or that is not
// UTF-8 in any statement, which was a 500; such a filter is refused before it reaches the store.
func TestTextNoUserCanHoldIsAClientErrorOnPostgres(t *testing.T) {
	s := startServerOn(t, storetest.PostgresSchema(t), nil)
	for _, query := range []string{"role=%00", "role=admin%00", "role=%FF", "namePrefix=%00", "namePrefix=%FF"} {
		res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users?" + query})
		if res.Status != http.StatusBadRequest {
			t.Errorf("GET /users?%s: %d %s, want 400", query, res.Status, res.Body)
			continue
		}
		res.ErrorMessage(t)
	}
	for _, p := range apitest.RPCProtocols {
		_, err := s.RPCClient(p, "").ListUsers(t.Context(), &usersv1.ListUsersRequest{Role: "admin\x00"})
		apitest.RPCWantCode(t, err, connect.CodeInvalidArgument)
	}
}
