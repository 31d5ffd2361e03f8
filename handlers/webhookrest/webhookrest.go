// Package webhookrest is the REST face of webhook subscriptions: each route calls the Webhooks
// service, as the RPC protocols do, with the protojson form of its messages as bodies, so that the
// rules and errors are the RPCs'. It knows the routes and what their bodies mean; how a body is
// read, how an answer is held and written, and how an error is answered are the service's REST
// rules, shared with every other route, which its caller gives it (REST).
package webhookrest

import (
	"net/http"

	"google.golang.org/protobuf/proto"

	"usersd/gen/users/v1/usersv1connect"
)

// REST is what the routes share with every REST route of the service.
type REST struct {
	// ReadBody reads a request body whose Content-Type is one of accepted: a 415 for another type,
	// a 413 past the body limit.
	ReadBody func(r *http.Request, accepted ...string) ([]byte, error)
	// DecodeBody reads the JSON body of a write into m with the strict codec, ignoring its
	// output-only members.
	DecodeBody func(r *http.Request, m proto.Message) error
	// PathID reads the path segment name, which must be a positive int32 in its canonical form.
	PathID func(r *http.Request, name string) (int32, error)
	// WriteJSON answers with body, a JSON document, held against the answer budget.
	WriteJSON func(w http.ResponseWriter, r *http.Request, status int, body []byte) error
	// Fail answers with err, in the REST error body.
	Fail func(w http.ResponseWriter, r *http.Request, err error)
}

// Route is one REST route of subscriptions. Every one needs webhooks.manage, reads included,
// whether reads of users are public or not: a subscription names where changes go.
type Route struct {
	Pattern string
	Handler http.Handler
}

// Routes are the REST routes of subscriptions, served by hooks.
func Routes(hooks usersv1connect.WebhooksHandler, rest REST) []Route {
	f := &face{hooks: hooks, rest: rest}
	return []Route{
		{"POST /webhooks", f.handle(f.create)},
		{"GET /webhooks", f.handle(f.list)},
		{"GET /webhooks/{id}", f.handle(f.get)},
		{"PATCH /webhooks/{id}", f.handle(f.update)},
		{"DELETE /webhooks/{id}", f.handle(f.delete)},
		{"POST /webhooks/{id}:rotateSecret", f.handle(f.rotateSecret)},
		{"POST /webhooks/{id}:replay", f.handle(f.replay)},
		{"GET /webhooks/{id}/deliveries", f.handle(f.listDeliveries)},
	}
}

type face struct {
	hooks usersv1connect.WebhooksHandler
	rest  REST
}

// handle serves fn, which returns its error instead of writing it, so that every error goes
// through the service's one error writer.
func (f *face) handle(fn func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			f.rest.Fail(w, r, err)
		}
	})
}
