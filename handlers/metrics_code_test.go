package handlers

import (
	"net/http"
	"testing"

	"connectrpc.com/connect"
)

func TestAnRPCAnswerWithoutACodeIsLabelledWithItsStatus(t *testing.T) {
	for _, c := range []struct {
		status int
		header http.Header
		want   string
	}{
		{http.StatusMethodNotAllowed, http.Header{}, "405"},
		{http.StatusUnsupportedMediaType, http.Header{}, "415"},
		{http.StatusServiceUnavailable, http.Header{}, "unavailable"},   // Connect's status of a code
		{http.StatusOK, http.Header{"Grpc-Status": {"5"}}, "not_found"}, // gRPC's code in its header
		{http.StatusOK, http.Header{"Grpc-Status": {"99"}}, "unknown"},  // a code no client knows
		{http.StatusTeapot, http.Header{"Grpc-Status": {"3"}}, "invalid_argument"},
	} {
		if got := codeOf(protocolConnect, nil, c.status, c.header).String(); got != c.want {
			t.Errorf("status %d, header %v: code %q, want %q", c.status, c.header, got, c.want)
		}
	}
	recorded := &requestInfo{hasRPCCode: true, rpcCode: connect.CodePermissionDenied}
	if got := codeOf(protocolGRPC, recorded, http.StatusOK, http.Header{}).String(); got != "permission_denied" {
		t.Errorf("a recorded code: %q", got)
	}
}
