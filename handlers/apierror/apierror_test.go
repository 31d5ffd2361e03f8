package apierror

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"usersd/store"
	"usersd/users"
)

// TestAFaultSaysNothingOfItsCause: a fault reaches the client as the fixed message, with code
// internal and REST status 500, and only the log holds what went wrong.
func TestAFaultSaysNothingOfItsCause(t *testing.T) {
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	fault := fmt.Errorf("open /var/lib/usersd/users.db: %w", errors.New("permission denied"))
	ce := Public(context.Background(), logger, fault)
	if ce.Code() != connect.CodeInternal || ce.Message() != InternalMessage {
		t.Fatalf("public form %v, want internal %q", ce, InternalMessage)
	}
	if got := RESTStatus(fault, ce); got != http.StatusInternalServerError {
		t.Fatalf("REST status %d, want 500", got)
	}
	if body := string(RESTBody(ce)); strings.Contains(body, "users.db") {
		t.Fatalf("the body tells the cause: %s", body)
	}
	if !strings.Contains(log.String(), "permission denied") {
		t.Fatalf("the log lacks the cause: %s", log.String())
	}
}

// TestAnUnavailableStoreIsRetriable: a store that cannot answer is 503 with a message that says to
// retry, and none of the store's own words.
func TestAnUnavailableStoreIsRetriable(t *testing.T) {
	err := fmt.Errorf("%w: dial tcp 10.0.0.7:5432: connection refused", store.ErrUnavailable)
	ce := Public(context.Background(), slog.New(slog.DiscardHandler), connect.NewError(connect.CodeUnavailable, err))
	if ce.Code() != connect.CodeUnavailable || strings.Contains(ce.Message(), "10.0.0.7") {
		t.Fatalf("public form %v, want unavailable without the address", ce)
	}
	if got := RESTStatus(err, ce); got != http.StatusServiceUnavailable {
		t.Fatalf("REST status %d, want 503", got)
	}
}

// TestAReasonDecidesTheStatusItsCodeShares: where one code stands for several failures, the
// reason's own status wins; otherwise the code's.
func TestAReasonDecidesTheStatusItsCodeShares(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{users.NewError(connect.CodeAborted, users.ReasonEtagMismatch, "changed"), http.StatusPreconditionFailed},
		{users.NewError(connect.CodeFailedPrecondition, users.ReasonChangesNotKept, "gone"), http.StatusGone},
		{users.NewError(connect.CodeAborted, users.ReasonNone, "conflict"), http.StatusConflict},
		{users.NewError(connect.CodeNotFound, users.ReasonNone, "no such user"), http.StatusNotFound},
		{New(http.StatusRequestEntityTooLarge, connect.CodeResourceExhausted, ReasonBodyTooLarge, "too large"), http.StatusRequestEntityTooLarge},
		{UnsupportedMediaType("not JSON"), http.StatusUnsupportedMediaType},
	} {
		ce := Public(context.Background(), slog.New(slog.DiscardHandler), c.err)
		if got := RESTStatus(c.err, ce); got != c.want {
			t.Errorf("%v: REST status %d, want %d", c.err, got, c.want)
		}
	}
}

// TestTheRESTBodyHoldsTheDetails: the REST body carries the reason, its metadata and the field a
// bad input names, the facts an RPC client reads from the error's details.
func TestTheRESTBodyHoldsTheDetails(t *testing.T) {
	ce := Public(context.Background(), slog.New(slog.DiscardHandler), UnsupportedMediaType("Content-Type must be application/json"))
	var body struct {
		Error           string            `json:"error"`
		Reason          string            `json:"reason"`
		Metadata        map[string]string `json:"metadata"`
		FieldViolations []struct {
			Field string `json:"field"`
		} `json:"fieldViolations"`
	}
	if err := json.Unmarshal(RESTBody(ce), &body); err != nil {
		t.Fatal(err)
	}
	if body.Reason != string(ReasonUnsupportedMediaType) || body.Metadata["field"] != "Content-Type" ||
		len(body.FieldViolations) != 1 || body.FieldViolations[0].Field != "Content-Type" {
		t.Fatalf("body %+v, want the reason and the field Content-Type", body)
	}
}

// TestAConnectErrorBodyIsWrittenWithoutHTMLEscapes: connect-go's body is encoded again, its text as
// it was (<, > and & not escaped), and with the details of its code when connect-go answered alone.
func TestAConnectErrorBodyIsWrittenWithoutHTMLEscapes(t *testing.T) {
	in := []byte(`{"code":"invalid_argument","message":"want \u003cuser\u003e \u0026 more"}`)
	out, err := rewriteConnectError(in, true)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"want <user> & more"`)) {
		t.Fatalf("rewritten body %s keeps the escapes", out)
	}
	if !bytes.Contains(out, []byte(`"type":"google.rpc.ErrorInfo"`)) || !bytes.Contains(out, []byte(`"type":"google.rpc.BadRequest"`)) {
		t.Fatalf("rewritten body %s lacks the details of invalid_argument", out)
	}
	kept, err := rewriteConnectError(in, false)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(kept, []byte("google.rpc")) {
		t.Fatalf("a body of the service's own gained details: %s", kept)
	}
}
