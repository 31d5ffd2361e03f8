// Reading and writing REST bodies: media types, the body limit, and protojson through the one codec.
package handlers

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"usersd/handlers/apierror"
	"usersd/handlers/codec"
	"usersd/handlers/restbody"
	"usersd/handlers/webhookrest"
	"usersd/users"
)

// restFunc is a REST handler that returns its error instead of writing it, so that every error goes
// through the one error writer.
type restFunc func(w http.ResponseWriter, r *http.Request) error

func (errs *errorWriter) rest(fn restFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			errs.write(w, r, err)
		}
	})
}

// restShared is what every REST route shares, for the faces in packages of their own.
func restShared(errs *errorWriter) webhookrest.REST {
	return webhookrest.REST{ReadBody: readBody, PathID: pathID, WriteJSON: writeHeldJSON, Fail: errs.write,
		DecodeBody: func(r *http.Request, m proto.Message) error { return decodeBody(r, m, "") }}
}

// readBody reads a request body whose Content-Type is one of accepted (parameters such as charset
// aside): 415 for another type, 413 past the body limit.
func readBody(r *http.Request, accepted ...string) ([]byte, error) {
	header := headerValue(r.Header, "Content-Type")
	mediaType, params, err := mime.ParseMediaType(header)
	if err != nil || !slices.Contains(accepted, mediaType) {
		return nil, apierror.UnsupportedMediaType("Content-Type must be %s, got %q", strings.Join(accepted, " or "), header)
	}
	if charset, ok := params["charset"]; ok && !strings.EqualFold(charset, "utf-8") {
		return nil, apierror.UnsupportedMediaType("JSON must be UTF-8, got charset %q", charset)
	}
	body, err := io.ReadAll(r.Body)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, apierror.New(http.StatusRequestEntityTooLarge, connect.CodeResourceExhausted, apierror.ReasonBodyTooLarge, "the body is larger than %d bytes", tooLarge.Limit)
	}
	if err != nil {
		return nil, err // invalid_argument, from withBodyLimit's reader
	}
	return body, nil
}

// decodeBody reads the JSON body of a write into m with the service's strict protojson codec,
// ignoring its output-only members whatever their values, except pathBound, the field the request
// compares with its path (see withoutOutputOnly).
func decodeBody(r *http.Request, m proto.Message, pathBound protoreflect.Name) error {
	body, err := readBody(r, restbody.MediaTypeJSON)
	if err != nil {
		return err
	}
	body = restbody.WithoutOutputOnly(body, m.ProtoReflect().Descriptor(), pathBound)
	if err := codec.UnmarshalJSON(body, m); err != nil {
		return users.InvalidField("body", "%v", err)
	}
	return nil
}

// writeMessage answers with the protojson form of m, held against the answer budget.
func writeMessage(w http.ResponseWriter, r *http.Request, status int, m proto.Message) error {
	body, err := codec.MarshalJSON(m)
	if err != nil {
		return fmt.Errorf("encode %T: %w", m, err)
	}
	// writeHeldJSON's two steps, without the call: this is the answer of every REST read of a user.
	if err := holdAnswer(r.Context(), len(body), isRead(r)); err != nil {
		return err
	}
	writeJSONBytes(w, status, body)
	return nil
}

// isRead reports whether a REST request only reads.
func isRead(r *http.Request) bool { return r.Method == http.MethodGet || r.Method == http.MethodHead }

// encodeList is a JSON array of the protojson form of each item, held against the answer budget:
// the caller sets its headers and writes it with writeJSONBytes.
func encodeList[M proto.Message](r *http.Request, items []M) ([]byte, error) {
	body, err := codec.MarshalJSONList(items)
	if err != nil {
		return nil, err
	}
	if err := holdAnswer(r.Context(), len(body), isRead(r)); err != nil {
		return nil, err
	}
	return body, nil
}

// writeHeldJSON answers with body, a JSON document, held against the answer budget.
func writeHeldJSON(w http.ResponseWriter, r *http.Request, status int, body []byte) error {
	if err := holdAnswer(r.Context(), len(body), isRead(r)); err != nil {
		return err
	}
	writeJSONBytes(w, status, body)
	return nil
}

// jsonContentType is the Content-Type value of every JSON answer, shared (see withSecurityHeaders).
var jsonContentType = []string{restbody.MediaTypeJSON}

func writeJSONBytes(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	w.Write(body)
}
