// The error writer: any error is answered in the protocol its request speaks, as REST JSON (a
// status and {"error": ...}), the RPC protocol's own error, or SCIM's error schema. What a client
// may see of it, its REST status and its details are package apierror's.
package handlers

import (
	"errors"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"usersd/handlers/apierror"
	"usersd/scim"
)

// errorWriter writes every error response of the service, REST and RPC alike.
type errorWriter struct {
	logger *slog.Logger
	rpc    *connect.ErrorWriter
	// routes says which requests are RPCs, whose errors are written in the RPC protocol; the
	// others get REST JSON.
	routes *routeTable
}

// write answers r with err: in the RPC protocol the request speaks, or as REST JSON.
func (ew *errorWriter) write(w http.ResponseWriter, r *http.Request, err error) {
	if scim.Serves(r) {
		ew.writeSCIM(w, r, err)
		return
	}
	ce := apierror.Public(r.Context(), ew.logger, err)
	if ew.routes.isRPC(r) {
		recordRPCCode(r.Context(), ce.Code())
		_ = ew.rpc.Write(w, r, ce) // the client has gone if this fails; nothing more to do
		return
	}
	switch ce.Code() {
	case connect.CodeUnauthenticated:
		if w.Header().Get("WWW-Authenticate") == "" { // a bearer token's refusal has its own
			w.Header().Set("WWW-Authenticate", `ApiKey header="x-api-key"`)
		}
	case connect.CodeUnavailable: // the store or the answer budget: both pass in seconds
		w.Header().Set("Retry-After", "1")
	}
	writeJSONBytes(w, apierror.RESTStatus(err, ce), apierror.RESTBody(ce))
}

// writeSCIM answers a SCIM request with err in SCIM's error schema: a refusal of the SCIM face's
// own as it is, any other error as the service makes it public.
func (ew *errorWriter) writeSCIM(w http.ResponseWriter, r *http.Request, err error) {
	if scim.AsError(err) != nil {
		scim.WriteError(w, err, 0, "")
		return
	}
	ce := apierror.Public(r.Context(), ew.logger, err)
	switch ce.Code() {
	case connect.CodeUnauthenticated:
		if w.Header().Get("WWW-Authenticate") == "" { // a bearer token's refusal has its own
			w.Header().Set("WWW-Authenticate", `Bearer realm="usersd"`)
		}
	case connect.CodeUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	scim.WriteError(w, err, apierror.RESTStatus(err, ce), ce.Message())
}

// writeUnavailableJSON writes the REST error body of a server that cannot answer yet: 503 with
// message, the reason UNAVAILABLE.
func writeUnavailableJSON(w http.ResponseWriter, message string) {
	writeJSONBytes(w, http.StatusServiceUnavailable, apierror.RESTBody(connect.NewError(connect.CodeUnavailable, errors.New(message))))
}
