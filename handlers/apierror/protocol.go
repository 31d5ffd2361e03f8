// Errors that connect-go writes itself, before a unary request reaches the service: a message it
// cannot decode, one over the size limit, a codec or compression it does not take. They never pass
// the interceptors that give the service's errors their details, so they get them here, on their
// way out, in each protocol's own form: the Connect error body, the grpc-status-details-bin
// trailer of gRPC, or the grpc-status-details-bin header of a gRPC-Web answer that holds only its
// status. An error that already carries an ErrorInfo is left as it is, and so is every error of a
// call that reached the interceptors (the code interceptor recorded its code): those are the
// service's errors, which have their details, or a handler's *connect.Error, which passes as made.
package apierror

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"usersd/internal/plainjson"
	"usersd/users"
)

// ProtocolField is the field that a bad input of the protocol itself names: connect-go says
// what is wrong with the request (its message, its encoding, a header of the protocol), not which
// field of it.
const ProtocolField = "request"

// WithProtocolDetails gives the errors of the RPCs that connect-go answers by itself the details
// of every other error (see WithDetails). isRPC says which requests are RPCs; answeredByConnect,
// asked once the call is over, whether connect-go answered it without reaching the service (whose
// errors have their details already).
func WithProtocolDetails(isRPC, answeredByConnect func(*http.Request) bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isRPC(r) {
			next.ServeHTTP(w, r)
			return
		}
		byConnect := func() bool { return answeredByConnect(r) }
		var contentType string
		if v := r.Header["Content-Type"]; len(v) > 0 {
			contentType = v[0]
		}
		switch {
		case strings.HasPrefix(contentType, "application/grpc-web"):
			next.ServeHTTP(&grpcWebStatusWriter{ResponseWriter: w, byConnect: byConnect}, r)
		case strings.HasPrefix(contentType, "application/grpc"):
			next.ServeHTTP(w, r)
			if byConnect() {
				addGRPCStatusDetails(w.Header(), http.TrailerPrefix)
			}
		case strings.HasPrefix(contentType, "application/connect+"): // a stream: its errors pass the interceptors
			next.ServeHTTP(w, r)
		default: // Connect unary, or a Connect GET
			cw := &connectErrorWriter{ResponseWriter: w}
			next.ServeHTTP(cw, r)
			cw.finish(byConnect())
		}
	})
}

// errorDetailsFor are the details that WithDetails would give an error of code with message that
// names nothing of its own.
func errorDetailsFor(code connect.Code, message string) []proto.Message {
	details := []proto.Message{&errdetails.ErrorInfo{Reason: string(protocolReason(code)), Domain: Domain}}
	if code == connect.CodeInvalidArgument {
		details[0].(*errdetails.ErrorInfo).Metadata = map[string]string{"field": ProtocolField}
		details = append(details, &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: ProtocolField, Description: message},
		}})
	}
	return details
}

// protocolReason is the reason of an error of the protocol: a bad input names the request, as
// INVALID_FIELD; every other code says it all.
func protocolReason(code connect.Code) string {
	if code == connect.CodeInvalidArgument {
		return string(users.ReasonInvalidField)
	}
	return string(users.CodeReason(code))
}

// addGRPCStatusDetails adds grpc-status-details-bin to the gRPC status in header under prefix
// (http.TrailerPrefix for trailers, "" for the headers of an answer that holds only its status),
// unless the status is OK or already holds an ErrorInfo.
func addGRPCStatusDetails(header http.Header, prefix string) {
	code, err := strconv.Atoi(header.Get(prefix + "Grpc-Status"))
	if err != nil || code == 0 {
		return
	}
	message, _ := url.PathUnescape(header.Get(prefix + "Grpc-Message")) // gRPC's percent-encoding
	st := &status.Status{Code: int32(code), Message: message}
	if existing := header.Get(prefix + "Grpc-Status-Details-Bin"); existing != "" {
		raw, err := connect.DecodeBinaryHeader(existing)
		if err != nil || proto.Unmarshal(raw, st) != nil || holdsErrorInfo(st.GetDetails()) {
			return
		}
	}
	for _, d := range errorDetailsFor(connect.Code(code), message) {
		if a, err := anypb.New(d); err == nil {
			st.Details = append(st.Details, a)
		}
	}
	if raw, err := proto.Marshal(st); err == nil {
		header.Set(prefix+"Grpc-Status-Details-Bin", connect.EncodeBinaryHeader(raw))
	}
}

func holdsErrorInfo(details []*anypb.Any) bool {
	for _, d := range details {
		if d.MessageName() == "google.rpc.ErrorInfo" {
			return true
		}
	}
	return false
}

// grpcWebStatusWriter adds the details to a gRPC-Web answer that holds only its status, in its
// headers: the form connect-go gives an error before any message. An error after a message is in
// the body's trailers, and comes from the service, which gave it its details.
type grpcWebStatusWriter struct {
	http.ResponseWriter
	byConnect   func() bool // whether connect-go answers the call itself
	wroteHeader bool
}

func (w *grpcWebStatusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		if w.byConnect() {
			addGRPCStatusDetails(w.Header(), "")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

// Flush passes connect-go's flushes on: it asks for http.Flusher itself.
func (w *grpcWebStatusWriter) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *grpcWebStatusWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *grpcWebStatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// connectErrorWriter holds back a Connect unary error body, the JSON that follows a status other
// than 200, so that finish can add the details before it is sent. Any other answer passes at once.
type connectErrorWriter struct {
	http.ResponseWriter
	status int          // the error status held back; 0 while the answer passes
	body   bytes.Buffer // the error body held back
	passed bool         // the status was written: what follows passes
}

func (w *connectErrorWriter) WriteHeader(code int) {
	if w.passed || w.status != 0 {
		return
	}
	if code != http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		w.status = code
		return
	}
	w.passed = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *connectErrorWriter) Write(p []byte) (int, error) {
	if !w.passed && w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.status != 0 {
		return w.body.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// Flush sends what passes; a held error body waits for finish.
func (w *connectErrorWriter) Flush() {
	if w.status == 0 {
		http.NewResponseController(w.ResponseWriter).Flush()
	}
}

func (w *connectErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish sends a held error body, encoded again (see rewriteConnectError): with the details of its
// code if connect-go answered the call itself and the body had no ErrorInfo.
func (w *connectErrorWriter) finish(byConnect bool) {
	if w.status == 0 {
		return
	}
	body := w.body.Bytes()
	if rewritten, err := rewriteConnectError(body, byConnect); err == nil {
		body = rewritten
	}
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(w.status)
	w.ResponseWriter.Write(body)
}

// connectWireError is the Connect protocol's error body.
type connectWireError struct {
	Code    string              `json:"code"`
	Message string              `json:"message,omitempty"`
	Details []connectWireDetail `json:"details,omitempty"`
}

// connectWireDetail is a detail of a Connect error body; Debug is connect-go's readable form of it,
// kept as it came.
type connectWireDetail struct {
	Type  string `json:"type"`
	Value string `json:"value"`
	Debug any    `json:"debug,omitempty"`
}

// rewriteConnectError returns the Connect error body encoded without HTML escapes (connect-go's
// encoding/json writes <, > and & escaped, in the message and in the details' debug forms), and
// when addDetails, with the details of its code added unless it holds an ErrorInfo already.
func rewriteConnectError(body []byte, addDetails bool) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // the debug forms' numbers stay as they were written
	var wire connectWireError
	if err := dec.Decode(&wire); err != nil {
		return nil, err
	}
	hasInfo := slices.ContainsFunc(wire.Details, func(d connectWireDetail) bool { return d.Type == "google.rpc.ErrorInfo" })
	var code connect.Code
	if addDetails && !hasInfo && code.UnmarshalText([]byte(wire.Code)) == nil {
		for _, d := range errorDetailsFor(code, wire.Message) {
			raw, err := proto.Marshal(d)
			if err != nil {
				return nil, err
			}
			wire.Details = append(wire.Details, connectWireDetail{
				Type: string(d.ProtoReflect().Descriptor().FullName()), Value: base64.RawStdEncoding.EncodeToString(raw)})
		}
	}
	return plainjson.Marshal(wire)
}
