// REST routes of webhook subscriptions: each calls the Webhooks service, as the RPC protocols do,
// with the protojson form of its messages as bodies. Every route needs webhooks.manage, reads
// included, whether reads of users are public or not: a subscription names where changes go.
package handlers

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/proto"

	"usersd/auth"
	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/handlers/codec"
	"usersd/handlers/restbody"
	"usersd/users"
)

func addWebhookRoutes(routes *routeTable, hooks usersv1connect.WebhooksHandler, errs *errorWriter) {
	routes.protected("POST /webhooks", auth.ScopeWebhooks, createWebhookREST(hooks, errs))
	routes.protected("GET /webhooks", auth.ScopeWebhooks, listWebhooksREST(hooks, errs))
	routes.protected("GET /webhooks/{id}", auth.ScopeWebhooks, getWebhookREST(hooks, errs))
	routes.protected("PATCH /webhooks/{id}", auth.ScopeWebhooks, updateWebhookREST(hooks, errs))
	routes.protected("DELETE /webhooks/{id}", auth.ScopeWebhooks, deleteWebhookREST(hooks, errs))
	routes.protected("POST /webhooks/{id}:rotateSecret", auth.ScopeWebhooks, rotateWebhookSecretREST(hooks, errs))
	routes.protected("POST /webhooks/{id}:replay", auth.ScopeWebhooks, replayWebhookREST(hooks, errs))
	routes.protected("GET /webhooks/{id}/deliveries", auth.ScopeWebhooks, listWebhookDeliveriesREST(hooks, errs))
}

// createWebhookREST is POST /webhooks: 201 with the subscription and its secret, which no other
// answer shows again.
func createWebhookREST(hooks usersv1connect.WebhooksHandler, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		webhook := &usersv1.Webhook{}
		if err := decodeBody(r, webhook, ""); err != nil {
			return err
		}
		res, err := hooks.CreateWebhook(r.Context(), &usersv1.CreateWebhookRequest{Webhook: webhook})
		if err != nil {
			return err
		}
		w.Header().Set("Location", webhookPath(res.GetWebhook().GetId()))
		return writeMessage(w, r, http.StatusCreated, res.GetWebhook())
	})
}

// listWebhooksREST is GET /webhooks: every subscription, oldest first, as a JSON array.
func listWebhooksREST(hooks usersv1connect.WebhooksHandler, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		res, err := hooks.ListWebhooks(r.Context(), &usersv1.ListWebhooksRequest{})
		if err != nil {
			return err
		}
		return writeList(w, r, res.GetWebhooks())
	})
}

func getWebhookREST(hooks usersv1connect.WebhooksHandler, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		res, err := hooks.GetWebhook(r.Context(), &usersv1.GetWebhookRequest{Id: id})
		if err != nil {
			return err
		}
		return writeMessage(w, r, http.StatusOK, res.GetWebhook())
	})
}

// updateWebhookREST is PATCH /webhooks/{id}, a JSON merge patch: the members it names are the
// fields it sets.
func updateWebhookREST(hooks usersv1connect.WebhooksHandler, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		body, err := readBody(r, mediaTypeMergePatch, mediaTypeJSON)
		if err != nil {
			return err
		}
		webhook, mask, err := restbody.WebhookMergePatch(body)
		if err != nil {
			return err
		}
		res, err := hooks.UpdateWebhook(r.Context(), &usersv1.UpdateWebhookRequest{Id: id, Webhook: webhook, UpdateMask: mask})
		if err != nil {
			return err
		}
		return writeMessage(w, r, http.StatusOK, res.GetWebhook())
	})
}

func deleteWebhookREST(hooks usersv1connect.WebhooksHandler, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		if _, err := hooks.DeleteWebhook(r.Context(), &usersv1.DeleteWebhookRequest{Id: id}); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

// rotateWebhookSecretREST is POST /webhooks/{id}:rotateSecret: 200 with the subscription and its
// new secret. It takes no body, or one that is RotateWebhookSecretRequest.
func rotateWebhookSecretREST(hooks usersv1connect.WebhooksHandler, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		req := &usersv1.RotateWebhookSecretRequest{}
		if err := decodeOptionalBody(r, req); err != nil {
			return err
		}
		if err := checkBodyID(req.GetId(), id); err != nil {
			return err
		}
		res, err := hooks.RotateWebhookSecret(r.Context(), &usersv1.RotateWebhookSecretRequest{Id: id})
		if err != nil {
			return err
		}
		return writeMessage(w, r, http.StatusOK, res.GetWebhook())
	})
}

// replayWebhookREST is POST /webhooks/{id}:replay with {"afterSequence"}: 200 with the
// subscription, its deliveredSequence moved back.
func replayWebhookREST(hooks usersv1connect.WebhooksHandler, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		body, err := readBody(r, mediaTypeJSON)
		if err != nil {
			return err
		}
		req := &usersv1.ReplayWebhookRequest{}
		if err := codec.UnmarshalJSON(body, req); err != nil {
			return users.InvalidField("body", "%v", err)
		}
		// proto3 reads a missing afterSequence as 0, which sends again everything the log keeps:
		// a body that leaves it out is more likely a mistake than that.
		if !hasMember(body, "afterSequence", "after_sequence") {
			return users.InvalidField("afterSequence", "afterSequence is required: the sequence after which the changes are sent again (\"0\" for everything the log keeps)")
		}
		if err := checkBodyID(req.GetId(), id); err != nil {
			return err
		}
		req.Id = id
		res, err := hooks.ReplayWebhook(r.Context(), req)
		if err != nil {
			return err
		}
		return writeMessage(w, r, http.StatusOK, res.GetWebhook())
	})
}

// listWebhookDeliveriesREST is GET /webhooks/{id}/deliveries: the recent attempts, newest first,
// as a JSON array.
func listWebhookDeliveriesREST(hooks usersv1connect.WebhooksHandler, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		res, err := hooks.ListWebhookDeliveries(r.Context(), &usersv1.ListWebhookDeliveriesRequest{Id: id})
		if err != nil {
			return err
		}
		return writeList(w, r, res.GetDeliveries())
	})
}

// hasMember reports whether body, a JSON object the codec accepted, has a member of one of names.
func hasMember(body []byte, names ...string) bool {
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return false
	}
	for _, name := range names {
		if _, ok := members[name]; ok {
			return true
		}
	}
	return false
}

func webhookPath(id int32) string { return "/webhooks/" + strconv.Itoa(int(id)) }

// writeList answers 200 with a JSON array of the protojson form of each item.
func writeList[M proto.Message](w http.ResponseWriter, r *http.Request, items []M) error {
	body, err := encodeList(r, items)
	if err != nil {
		return err
	}
	writeJSONBytes(w, http.StatusOK, body)
	return nil
}

// checkBodyID refuses a body whose id names another resource than the path.
func checkBodyID(inBody, inPath int32) error {
	if inBody != 0 && inBody != inPath {
		return users.InvalidField("id", "id %d in the body does not match %d in the path; leave it out or make it equal", inBody, inPath)
	}
	return nil
}

// decodeOptionalBody is decodeBody for a custom method whose body may be left out: a request
// without one (no Content-Type and nothing sent) is m as it is.
func decodeOptionalBody(r *http.Request, m proto.Message) error {
	if r.ContentLength == 0 {
		return nil
	}
	if headerValue(r.Header, "Content-Type") == "" {
		first, err := io.ReadAll(io.LimitReader(r.Body, 1))
		if err == nil && len(first) == 0 {
			return nil
		}
	}
	return decodeBody(r, m, "")
}
