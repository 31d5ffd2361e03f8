// The details every error of usersd carries, on every protocol: a google.rpc.ErrorInfo with its
// reason (AIP-193), and for a bad input a google.rpc.BadRequest naming the field. RPC clients read
// them from the error's details; REST clients from the error body, which holds the same facts
// ("reason", "metadata", "fieldViolations") beside "error".
package apierror

import (
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	"usersd/internal/plainjson"
	"usersd/users"
)

// Domain is ErrorInfo.domain of every error usersd answers: the reasons are its own.
const Domain = "usersd"

// WithDetails adds to ce, the public form of err, the ErrorInfo of its reason and, for a bad input,
// the BadRequest naming the field; err is what the service returned, which holds the reason.
func WithDetails(ce *connect.Error, err error) *connect.Error {
	reason, metadata, field := users.CodeReason(ce.Code()), map[string]string(nil), ""
	var he *HTTPError
	var ue *users.Error
	switch {
	case errors.As(err, &he):
		if he.reason != users.ReasonNone {
			reason = he.reason
		}
		if he.field != "" {
			metadata, field = map[string]string{"field": he.field}, he.field
		}
	case errors.As(err, &ue) && ue.Code() == ce.Code():
		reason, metadata, field = ue.Reason(), ue.Metadata(), ue.Field()
	}
	addDetail(ce, &errdetails.ErrorInfo{Reason: string(reason), Domain: Domain, Metadata: metadata})
	if ce.Code() == connect.CodeInvalidArgument && field != "" { // every bad input of ours names one
		addDetail(ce, &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: field, Description: ce.Message()},
		}})
	}
	return ce
}

// addDetail adds one detail to ce. The messages are the fixed genproto types, which always marshal.
func addDetail(ce *connect.Error, m proto.Message) {
	if d, err := connect.NewErrorDetail(m); err == nil {
		ce.AddDetail(d)
	}
}

// restErrorBody is the REST error body: the message, and the facts of the error's details.
type restErrorBody struct {
	Error           string               `json:"error"`
	Reason          string               `json:"reason,omitempty"`
	Metadata        map[string]string    `json:"metadata,omitempty"`
	FieldViolations []restFieldViolation `json:"fieldViolations,omitempty"`
}

// restFieldViolation is a google.rpc.BadRequest.FieldViolation in its JSON form.
type restFieldViolation struct {
	Field       string `json:"field"`
	Description string `json:"description"`
}

// RESTBody is the REST error body of ce, from its message and the details WithDetails added; an
// error without an ErrorInfo has its code's reason.
func RESTBody(ce *connect.Error) []byte {
	body := restErrorBody{Error: ce.Message(), Reason: string(users.CodeReason(ce.Code()))}
	for _, d := range ce.Details() {
		switch v, _ := d.Value(); v := v.(type) {
		case *errdetails.ErrorInfo:
			body.Reason, body.Metadata = v.GetReason(), v.GetMetadata()
		case *errdetails.BadRequest:
			for _, fv := range v.GetFieldViolations() {
				body.FieldViolations = append(body.FieldViolations, restFieldViolation{fv.GetField(), fv.GetDescription()})
			}
		}
	}
	encoded, _ := plainjson.Marshal(body) // strings and maps of strings always encode
	return encoded
}
