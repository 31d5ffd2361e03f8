package handlers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/anypb"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/handlers/apierror"
	"usersd/internal/apitest"
	conformancev1 "usersd/internal/conformancetest/gen/connectrpc/conformance/v1"
	"usersd/store/sqlstore"
)

// TestAFaultIsAnsweredWithTheFixedMessageOnEveryProtocol breaks the store for real (it is closed
// under the running service) and checks what clients see: the fixed text, never the driver's words,
// while the log keeps the detail with the request id.
func TestAFaultIsAnsweredWithTheFixedMessageOnEveryProtocol(t *testing.T) {
	st, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	h, err := New(Config{Store: st, Keys: testKeys("k"), Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := startH2C(t, h)
	st.Close()

	res, err := http.Get(srv.URL + "/users/1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 500 || string(body) != `{"error":"Internal Server Error","reason":"INTERNAL"}` {
		t.Fatalf("REST: %d %s", res.StatusCode, body)
	}
	if id := res.Header.Get("X-Request-Id"); !strings.Contains(logs.String(), id) || !strings.Contains(logs.String(), "database is closed") {
		t.Fatalf("the log does not hold the fault with request id %s:\n%s", id, logs)
	}

	wantInternalOnEveryProtocol(t, srv.URL)

	health, err := http.Get(srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(health.Body)
	health.Body.Close()
	if health.StatusCode != 503 || string(body) != `{"ok":false}` {
		t.Fatalf("health with the store gone: %d %s", health.StatusCode, body)
	}
}

// TestAPanicIsAnsweredInTheRequestsProtocol checks the final error handler itself: a handler that
// panics under an RPC path answers each RPC protocol with its own internal error, and under any
// other path with the REST body.
func TestAPanicIsAnsweredInTheRequestsProtocol(t *testing.T) {
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	routes := newRouteTable(testGate(t, "k"), logger, nil, 0)
	routes.rpc("/"+usersv1connect.UsersName+"/", http.NotFoundHandler(), nil)
	panicking := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("deliberate: secret detail") })
	srv := startH2C(t, withRequestContext(0, false, nil, withObservation(observer{accessLog: logs, routes: routes}, withRecover(logger, routes.errs, panicking))))

	wantInternalOnEveryProtocol(t, srv.URL)
	res, err := http.Get(srv.URL + "/anything")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 500 || string(body) != `{"error":"Internal Server Error","reason":"INTERNAL"}` || strings.Contains(string(body), "secret") {
		t.Fatalf("REST: %d %s", res.StatusCode, body)
	}
	if !strings.Contains(logs.String(), "deliberate: secret detail") {
		t.Fatalf("the panic is not in the log:\n%s", logs)
	}
}

// wantInternalOnEveryProtocol calls GetUser over each RPC protocol and expects the fixed internal error.
func wantInternalOnEveryProtocol(t *testing.T, baseURL string) {
	t.Helper()
	for name, opts := range map[string][]connect.ClientOption{
		"Connect binary": nil, "Connect JSON": {connect.WithProtoJSON()}, "gRPC": {connect.WithGRPC()}, "gRPC-Web": {connect.WithGRPCWeb()},
	} {
		client := usersv1connect.NewUsersClient(h2cClient(), baseURL, opts...)
		_, err := client.GetUser(context.Background(), &usersv1.GetUserRequest{Id: 1})
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeInternal || ce.Message() != apierror.InternalMessage {
			t.Errorf("%s: %v, want internal with the fixed message", name, err)
		}
	}
}

// startH2C serves h on a loopback listener that speaks HTTP/1.1 and h2c, as the real server does.
func startH2C(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func h2cClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}

// syncBuffer is a log destination that handlers on many goroutines may write to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestAPanicAfterTheAnswerBeganCutsItOff: once a handler has sent its status and part of its body,
// a panic cannot become an error answer any more; the final error handler aborts the response, so
// the client sees a broken answer rather than a body with an error glued on. It runs New's own
// chain of middleware around a route that panics halfway, with and without an access log, and a
// chain with a well-behaved wrapper (Unwrap, Flush) between the access log and the final error
// handler, where one once hid the begun answer from it.
func TestAPanicAfterTheAnswerBeganCutsItOff(t *testing.T) {
	halfway := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"partial":`))
		http.NewResponseController(w).Flush()
		panic("deliberate: after the answer began")
	})
	for _, c := range []struct {
		name  string
		chain func(*slog.Logger, *routeTable) http.Handler
	}{
		{"New's chain without an access log", func(logger *slog.Logger, routes *routeTable) http.Handler {
			return withMiddleware(Config{Logger: logger, MaxBodyBytes: DefaultMaxBodyBytes}, observer{routes: routes}, routes, nil, halfway)
		}},
		{"New's chain with an access log", func(logger *slog.Logger, routes *routeTable) http.Handler {
			return withMiddleware(Config{Logger: logger, MaxBodyBytes: DefaultMaxBodyBytes}, observer{accessLog: &syncBuffer{}, routes: routes}, routes, nil, halfway)
		}},
		{"a wrapper between the access log and the final error handler", func(logger *slog.Logger, routes *routeTable) http.Handler {
			return withRequestContext(0, false, nil, withObservation(observer{accessLog: &syncBuffer{}, routes: routes}, passThrough(withRecover(logger, routes.errs, halfway))))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs := &syncBuffer{}
			logger := slog.New(slog.NewJSONHandler(logs, nil))
			srv := startH2C(t, c.chain(logger, newRouteTable(testGate(t, "k"), logger, nil, 0)))
			res, err := http.Get(srv.URL + "/anything")
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err == nil || strings.Contains(string(body), "error") {
				t.Errorf("the answer %q (read error %v): want it cut off, with no error glued on", body, err)
			}
			if !strings.Contains(logs.String(), "panic after the response began") {
				t.Errorf("the panic is not logged as one after the response began:\n%s", logs)
			}
		})
	}
}

// passThrough is a well-behaved wrapper of the writer: it changes nothing, and offers Unwrap and
// Flush as a middleware should.
func passThrough(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(passThroughWriter{w}, r)
	})
}

type passThroughWriter struct{ http.ResponseWriter }

func (p passThroughWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

func (p passThroughWriter) Flush() { http.NewResponseController(p.ResponseWriter).Flush() }

// A *connect.Error that a handler returns reaches the client as it is, on every protocol: its code,
// its message, its details and its metadata; unavailable too, unless the store is what is
// unavailable. Faults and the codes of faults (internal, unknown, data_loss) still say nothing but
// their reason, INTERNAL.
func TestConnectErrorsOfHandlersPassAsTheyAre(t *testing.T) {
	s := startServerWith(t, withEchoService(Config{}))
	detail := &conformancev1.Header{Name: "why", Value: []string{"a detail"}}
	for _, p := range apitest.RPCProtocols {
		for _, code := range []connect.Code{connect.CodeUnavailable, connect.CodeResourceExhausted, connect.CodeFailedPrecondition} {
			t.Run(p.Name+"/"+code.String(), func(t *testing.T) {
				_, err := echoClient(s, p).Unary(t.Context(), connect.NewRequest(&conformancev1.UnaryRequest{
					ResponseDefinition: &conformancev1.UnaryResponseDefinition{Response: &conformancev1.UnaryResponseDefinition_Error{
						Error: &conformancev1.Error{Code: conformancev1.Code(code), Message: new("the handler's own words"), Details: []*anypb.Any{mustAny(detail)}},
					}},
				}))
				var ce *connect.Error
				if !errors.As(err, &ce) || ce.Code() != code || ce.Message() != "the handler's own words" {
					t.Fatalf("got %v, want %v with the handler's message", err, code)
				}
				if len(ce.Details()) != 1 || ce.Meta().Get("X-Echo") != "from the handler" {
					t.Fatalf("got %d details and X-Echo %q, want the handler's detail and metadata", len(ce.Details()), ce.Meta().Get("X-Echo"))
				}
			})
		}
		for _, code := range []connect.Code{connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss} {
			t.Run(p.Name+"/"+code.String()+" is a fault", func(t *testing.T) {
				_, err := echoClient(s, p).Unary(t.Context(), connect.NewRequest(&conformancev1.UnaryRequest{
					ResponseDefinition: &conformancev1.UnaryResponseDefinition{Response: &conformancev1.UnaryResponseDefinition_Error{
						Error: &conformancev1.Error{Code: conformancev1.Code(code), Message: new("a secret"), Details: []*anypb.Any{mustAny(detail)}},
					}},
				}))
				var ce *connect.Error
				if !errors.As(err, &ce) || ce.Code() != connect.CodeInternal || ce.Message() != apierror.InternalMessage || ce.Meta().Get("X-Echo") != "" {
					t.Fatalf("got %v (X-Echo %q), want internal %q and none of the handler's metadata", err, ce.Meta().Get("X-Echo"), apierror.InternalMessage)
				}
				wantDetails(t, p.Name, ce, "INTERNAL", nil) // the reason of every fault, and none of the handler's details
			})
		}
	}
}
