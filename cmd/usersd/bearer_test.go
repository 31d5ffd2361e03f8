package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"usersd/auth/oidctest"
	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/internal/apitest"
)

// TestTheBinaryTakesBearerTokensOfItsIssuer runs usersd with -jwt-issuer pointing at an issuer on
// loopback that is down when usersd starts: usersd starts all the same, answers a token 503 until
// the issuer's keys load, then writes with a valid token over REST and gRPC, refuses an expired
// one (401, WWW-Authenticate) and one without users.write (403), and records the token's subject
// as the actor of the change; no token reaches the log.
func TestTheBinaryTakesBearerTokensOfItsIssuer(t *testing.T) {
	iss := oidctest.Start(t)
	iss.SetDown(true)
	cmd, s, logs := startProcess(t, filepath.Join(t.TempDir(), "users.db"), "-jwt-issuer", iss.URL, "-jwt-audience", "usersd")
	writer := iss.Sign(t, "rs256", iss.Claims("usersd", "ci-robot", "users.read users.write"))
	create := func(token, name string) apitest.Response {
		return s.Do(t, http.DefaultClient, apitest.Request{Method: "POST", Path: "/users", Body: fmt.Sprintf(`{"name":%q}`, name),
			Header: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + token}})
	}
	if res := create(writer, "Early"); res.Status != http.StatusServiceUnavailable {
		t.Fatalf("a token while the issuer is down: %d %s, want 503", res.Status, res.Body)
	}
	iss.SetDown(false)
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		res := create(writer, "Ada")
		if res.Status == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a valid token 40 s after the issuer came back: %d %s", res.Status, res.Body)
		}
	}

	watch, err := apitest.OpenWatchWithKey(t, s.Server, apitest.WatchProtocols()[0], apitest.Key, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if e := watch.Next(t, 10*time.Second); e.GetActor() != "ci-robot" || e.GetUser().GetName() != "Ada" {
		t.Errorf("the change: %v, want Ada created by ci-robot", e.UserEvent)
	}

	grpc := usersv1connect.NewUsersClient(apitest.H2CClient, s.BaseURL, connect.WithGRPC())
	ctx, info := connect.NewClientContext(context.Background())
	info.RequestHeader().Set("Authorization", "Bearer "+writer)
	if _, err := grpc.CreateUser(ctx, &usersv1.CreateUserRequest{User: &usersv1.User{Name: "Grace"}}); err != nil {
		t.Errorf("CreateUser over gRPC with the token: %v", err)
	}

	expired := iss.Claims("usersd", "ci-robot", "users.write")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	res := create(iss.Sign(t, "es256", expired), "Late")
	if res.Status != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != `Bearer error="invalid_token"` {
		t.Errorf("an expired token: %d %s (WWW-Authenticate %q)", res.Status, res.Body, res.Header.Get("WWW-Authenticate"))
	}
	reader := iss.Sign(t, "eddsa", iss.Claims("usersd", "dashboard", "users.read"))
	if res := create(reader, "Refused"); res.Status != http.StatusForbidden {
		t.Errorf("a token without users.write: %d %s, want 403", res.Status, res.Body)
	}

	stopProcess(cmd)
	for _, line := range <-logs {
		if text := fmt.Sprint(line); strings.Contains(text, writer) || strings.Contains(text, reader) {
			t.Fatalf("a token is in the log: %v", line)
		}
	}
}
