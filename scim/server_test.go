package scim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"usersd/auth"
	"usersd/handlers"
	"usersd/store/sqlstore"
	"usersd/store/storetest"
)

// The keys of the test servers: one that holds both scopes, one that only reads.
const (
	writeKey = "scim-test-key-0123456789"
	readKey  = "scim-read-key-0123456789"
)

// server is usersd's whole handler, as handlers.New builds it, on a real loopback listener over a
// store of its own: the SCIM face as identity providers reach it, beside REST.
type server struct {
	t    testing.TB
	base string
}

// eachBackend runs test against a server over SQLite and, when one answers, over PostgreSQL.
func eachBackend(t *testing.T, test func(t *testing.T, s *server)) {
	t.Run("sqlite", func(t *testing.T) {
		test(t, startServer(t, filepath.Join(t.TempDir(), "users.db")))
	})
	t.Run("postgres", func(t *testing.T) {
		test(t, startServer(t, storetest.PostgresSchema(t)))
	})
}

func startServer(t testing.TB, dsn string) *server {
	t.Helper()
	return startServerWith(t, dsn, handlers.Config{})
}

// startServerWith is startServer with cfg's settings (its store, keys and logger are the test's).
func startServerWith(t testing.TB, dsn string, cfg handlers.Config) *server {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	keys := &auth.APIKeys{}
	writer, reader := auth.NewAPIKey(writeKey), auth.NewAPIKey(readKey)
	writer.Name = "entra-id"
	reader.Name, reader.Scopes = "reader", auth.ScopeRead
	for _, k := range []auth.APIKey{writer, reader} {
		if err := keys.Add(k); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Store, cfg.Keys, cfg.Logger = st, keys, slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := handlers.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(svc)
	srv.Config.ConnContext = handlers.ConnContext
	srv.Config.Protocols = new(http.Protocols) // HTTP/1.1 and h2c, as the real server speaks
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(func() {
		svc.EndWatches()
		srv.Close()
	})
	return &server{t: t, base: srv.URL}
}

// answer is a response as the tests read it.
type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// do sends method path with body (JSON text, "" for none) and the headers, as an identity provider
// does: its API key as a bearer unless the headers say otherwise.
func (s *server) do(method, path, body string, headers ...string) answer {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+writeKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/scim+json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	a := answer{status: res.StatusCode, header: res.Header, raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &a.body); err != nil {
			s.t.Fatalf("%s %s: %d, not a JSON object: %s", method, path, res.StatusCode, raw)
		}
		if ct := res.Header.Get("Content-Type"); strings.HasPrefix(path, "/scim/") && ct != "application/scim+json" {
			s.t.Errorf("%s %s: Content-Type %q, want application/scim+json", method, path, ct)
		}
	}
	return a
}

// want fails the test unless the answer has status.
func (a answer) want(t *testing.T, status int) answer {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d: %s", a.status, status, a.raw)
	}
	return a
}

// wantError fails the test unless the answer is SCIM's error schema with status and scimType.
func (a answer) wantError(t *testing.T, status int, scimType string) {
	t.Helper()
	a.want(t, status)
	schemas, _ := a.body["schemas"].([]any)
	if len(schemas) != 1 || schemas[0] != "urn:ietf:params:scim:api:messages:2.0:Error" {
		t.Errorf("error schemas %v, want SCIM's error schema", a.body["schemas"])
	}
	if got, _ := a.body["status"].(string); got != strconv.Itoa(status) {
		t.Errorf("error status %v, want the string %q", a.body["status"], strconv.Itoa(status))
	}
	if got, _ := a.body["scimType"].(string); got != scimType {
		t.Errorf("scimType %q, want %q: %s", got, scimType, a.raw)
	}
	if detail, _ := a.body["detail"].(string); detail == "" {
		t.Errorf("error without a detail: %s", a.raw)
	}
}

// str is the string at a path of dotted keys and list indexes in a decoded body, "" if none.
func str(v any, path string) string {
	for key := range strings.SplitSeq(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[key]
		case []any:
			i := 0
			if err := json.Unmarshal([]byte(key), &i); err != nil || i >= len(x) {
				return ""
			}
			v = x[i]
		default:
			return ""
		}
	}
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	default:
		b, _ := json.Marshal(x)
		return string(bytes.Trim(b, `"`))
	}
}
