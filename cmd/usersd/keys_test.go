package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/internal/proctest"
)

// newKeyLine runs `usersd key` with args and returns the key it printed and the keys file line.
func newKeyLine(t *testing.T, args ...string) (key, line string) {
	t.Helper()
	stdout, stderr, code := runBinary(t, nil, append([]string{"key"}, args...)...)
	m := regexp.MustCompile(`^key:  (\S{32})\nline: (sha256:[0-9a-f]{64} name=\S+ scopes=\S+)\n$`).FindStringSubmatch(stdout)
	if code != 0 || stderr != "" || m == nil {
		t.Fatalf("usersd key %v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
	}
	if strings.Contains(m[2], m[1]) {
		t.Fatalf("the keys file line %q holds the key", m[2])
	}
	return m[1], m[2]
}

// TestKeysMadeByUsersdKeyServeFromTheirDigests makes two keys with `usersd key` (one read-only),
// serves with a keys file that holds only their digests and with reads private, and checks what
// each may do over REST and gRPC; neither key appears in the logs, and the access log names the
// caller by its key's name.
func TestKeysMadeByUsersdKeyServeFromTheirDigests(t *testing.T) {
	dashboard, dashboardLine := newKeyLine(t, "-name", "dashboard", "-scopes", "users.read")
	importer, importerLine := newKeyLine(t, "-name", "importer")
	if !strings.HasSuffix(importerLine, " scopes=users.read,users.write") {
		t.Fatalf("a key made without -scopes: %q, want both scopes", importerLine)
	}
	keysFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keysFile, []byte("# made with usersd key\n"+dashboardLine+"\n"+importerLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, s, logs := startProcessWithEnv(t, []string{"USERS_API_KEYS="}, filepath.Join(t.TempDir(), "users.db"),
		"-api-keys-file", keysFile, "-public-reads=false")

	get := func(key string) apitest.Response {
		return s.Do(t, http.DefaultClient, apitest.Request{Method: "GET", Path: "/users", Header: map[string]string{"x-api-key": key}})
	}
	create := func(key, name string) apitest.Response {
		return s.Do(t, http.DefaultClient, apitest.Request{Method: "POST", Path: "/users", Body: fmt.Sprintf(`{"name":%q}`, name),
			Header: map[string]string{"x-api-key": key, "Content-Type": "application/json"}})
	}
	if res := s.Do(t, http.DefaultClient, apitest.Request{Method: "GET", Path: "/users"}); res.Status != http.StatusUnauthorized {
		t.Errorf("a read without a key, reads private: %d %s, want 401", res.Status, res.Body)
	}
	if res := get(dashboard); res.Status != http.StatusOK {
		t.Errorf("a read with the read-only key: %d %s", res.Status, res.Body)
	}
	if res := create(dashboard, "refused"); res.Status != http.StatusForbidden || !strings.Contains(res.ErrorMessage(t), "users.write") {
		t.Errorf("a create with the read-only key: %d %s, want 403 naming users.write", res.Status, res.Body)
	}
	if res := create(importer, "Ada"); res.Status != http.StatusCreated {
		t.Errorf("a create with the full key: %d %s", res.Status, res.Body)
	}
	grpc := s.RPCClient(apitest.RPCProtocolNamed(t, "gRPC"), dashboard)
	if _, err := grpc.CreateUser(context.Background(), &usersv1.CreateUserRequest{User: &usersv1.User{Name: "refused"}}); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("CreateUser over gRPC with the read-only key: %v, want permission_denied", err)
	}
	if res, err := grpc.ListUsers(context.Background(), &usersv1.ListUsersRequest{}); err != nil || len(res.GetUsers()) != 1 {
		t.Errorf("ListUsers over gRPC with the read-only key: %v %v, want the one user", res, err)
	}

	stopProcess(cmd)
	lines := <-logs
	var named bool
	for _, line := range lines {
		text := fmt.Sprint(line)
		if strings.Contains(text, dashboard) || strings.Contains(text, importer) {
			t.Fatalf("a key is in the log: %v", line)
		}
		if line["method"] == "POST" && line["caller"] == "importer" {
			named = true
		}
	}
	if !named {
		t.Errorf("no access line names the caller importer of the create; the lines:\n%v", lines)
	}
}

// TestTheBinaryLimitsEachCallersRate serves with -rate-limit 0.1 -rate-burst 2 (a token every 10 s,
// so that a slow machine cannot refill the bucket between requests): a key's third request is 429 with Retry-After and the draft's headers over REST, and
// resource_exhausted over gRPC; another caller is not held back; and usersd_refused_requests_total
// counts each refusal by its reason, never by caller.
func TestTheBinaryLimitsEachCallersRate(t *testing.T) {
	adminAddr := proctest.FreeLoopbackAddr(t)
	_, s, _ := startProcessWithEnv(t, []string{"USERS_API_KEYS=" + apitest.Key + ",another-key-0123456789"}, filepath.Join(t.TempDir(), "users.db"),
		"-rate-limit", "0.1", "-rate-burst", "2", "-admin-addr", adminAddr)
	admin := &testServer{Server: apitest.Server{BaseURL: "http://" + adminAddr}}
	get := func(key string) apitest.Response {
		return s.Do(t, http.DefaultClient, apitest.Request{Method: "GET", Path: "/users", Header: map[string]string{"x-api-key": key}})
	}
	for i := range 2 {
		if res := get(apitest.Key); res.Status != http.StatusOK {
			t.Fatalf("request %d of the burst: %d %s", i+1, res.Status, res.Body)
		}
	}
	res := get(apitest.Key)
	if retry, err := strconv.Atoi(res.Header.Get("Retry-After")); res.Status != http.StatusTooManyRequests || err != nil || retry < 1 || retry > 10 ||
		res.Header.Get("RateLimit-Policy") != `"caller";q=2;w=20` || !strings.HasPrefix(res.Header.Get("RateLimit"), `"caller";r=0;t=`) {
		t.Fatalf("the third request at once: %d %s %v, want 429 with Retry-After and the RateLimit headers", res.Status, res.Body, res.Header)
	}
	grpc := s.RPCClient(apitest.RPCProtocolNamed(t, "gRPC"), apitest.Key)
	if _, err := grpc.ListUsers(context.Background(), &usersv1.ListUsersRequest{}); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("ListUsers over gRPC with the spent key: %v, want resource_exhausted", err)
	}
	if res := get("another-key-0123456789"); res.Status != http.StatusOK {
		t.Errorf("another key: %d %s", res.Status, res.Body)
	}
	if res := get("not-a-key-0123456789"); res.Status != http.StatusOK {
		t.Errorf("a wrong key on a public read: %d %s, want it served as to anyone", res.Status, res.Body)
	}
	if res := s.Do(t, http.DefaultClient, apitest.Request{Method: "DELETE", Path: "/users/1"}); res.Status != http.StatusUnauthorized {
		t.Errorf("a delete without a key: %d %s", res.Status, res.Body)
	}
	for reason, want := range map[string]float64{"rate": 2, "no_credential": 1} {
		if got := admin.Metric(t, "usersd_refused_requests_total", map[string]string{"reason": reason}); got != want {
			t.Errorf("usersd_refused_requests_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	if body := string(admin.Do(t, apitest.HTTP1Client, apitest.Request{Method: "GET", Path: "/metrics"}).Body); strings.Contains(body, apitest.Key) || strings.Contains(body, `caller="`) {
		t.Errorf("the metrics hold a key or a caller label")
	}
}
