package scim

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"usersd/internal/plainjson"
	"usersd/users"
)

// The scimType values of RFC 7644 section 3.12 that usersd answers.
const (
	typeInvalidFilter = "invalidFilter"
	typeUniqueness    = "uniqueness"
	typeMutability    = "mutability"
	typeInvalidSyntax = "invalidSyntax"
	typeInvalidPath   = "invalidPath"
	typeNoTarget      = "noTarget"
	typeInvalidValue  = "invalidValue"
)

// Error is a refusal that SCIM names itself: a 400 with its scimType, or another status.
type Error struct {
	Status int
	Type   string // RFC 7644's scimType; "" for none
	Detail string
}

func (e *Error) Error() string { return e.Detail }

// refuse is the 400 of a request that SCIM's scimType names.
func refuse(scimType, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: scimType, Detail: strings.ToValidUTF8(fmt.Sprintf(format, args...), "\uFFFD")}
}

// Serves reports whether r is a SCIM request, whose errors WriteError writes.
func Serves(r *http.Request) bool {
	return r.URL.Path == Prefix || strings.HasPrefix(r.URL.Path, Prefix+"/")
}

// AsError returns err's *Error, or nil if it is none: a refusal of this package's own, which
// needs no more making public.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// WriteError answers with SCIM's error schema. A refusal of this package's is written as it is;
// any other error with the status and detail that the service's error writer made public of it,
// and the scimType that the service's reason implies.
func WriteError(w http.ResponseWriter, err error, status int, detail string) {
	e := AsError(err)
	if e == nil {
		e = &Error{Status: status, Type: typeOf(err, status), Detail: detail}
	}
	body := map[string]any{"schemas": []string{schemaError}, "status": strconv.Itoa(e.Status), "detail": e.Detail}
	if e.Type != "" {
		body["scimType"] = e.Type
	}
	writeJSON(w, e.Status, body)
}

// typeOf is the scimType of an error of the service, answered with status.
func typeOf(err error, status int) string {
	var ue *users.Error
	if !errors.As(err, &ue) {
		return ""
	}
	switch {
	case ue.Code() == connect.CodeAlreadyExists:
		return typeUniqueness
	case status == http.StatusBadRequest && ue.Code() == connect.CodeInvalidArgument:
		return typeInvalidValue
	}
	return ""
}

// writeJSON answers body as SCIM JSON with status.
func writeJSON(w http.ResponseWriter, status int, body any) {
	encoded, err := plainjson.Marshal(body)
	if err != nil { // the bodies are maps and slices of strings, numbers and booleans
		http.Error(w, "cannot encode the answer", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(encoded)))
	w.WriteHeader(status)
	_, _ = w.Write(encoded) // the client has gone if this fails
}
