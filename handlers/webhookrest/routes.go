package webhookrest

import (
	"net/http"
	"strconv"

	usersv1 "usersd/gen/users/v1"
	"usersd/handlers/codec"
	"usersd/handlers/restbody"
	"usersd/users"
)

// create is POST /webhooks: 201 with the subscription and its secret, which no other answer shows
// again.
func (f *face) create(w http.ResponseWriter, r *http.Request) error {
	webhook := &usersv1.Webhook{}
	if err := f.rest.DecodeBody(r, webhook); err != nil {
		return err
	}
	res, err := f.hooks.CreateWebhook(r.Context(), &usersv1.CreateWebhookRequest{Webhook: webhook})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/webhooks/"+strconv.Itoa(int(res.GetWebhook().GetId())))
	return f.writeMessage(w, r, http.StatusCreated, res.GetWebhook())
}

// list is GET /webhooks: every subscription, oldest first, as a JSON array.
func (f *face) list(w http.ResponseWriter, r *http.Request) error {
	res, err := f.hooks.ListWebhooks(r.Context(), &usersv1.ListWebhooksRequest{})
	if err != nil {
		return err
	}
	body, err := codec.MarshalJSONList(res.GetWebhooks())
	if err != nil {
		return err
	}
	return f.rest.WriteJSON(w, r, http.StatusOK, body)
}

func (f *face) get(w http.ResponseWriter, r *http.Request) error {
	id, err := f.rest.PathID(r, "id")
	if err != nil {
		return err
	}
	res, err := f.hooks.GetWebhook(r.Context(), &usersv1.GetWebhookRequest{Id: id})
	if err != nil {
		return err
	}
	return f.writeMessage(w, r, http.StatusOK, res.GetWebhook())
}

// update is PATCH /webhooks/{id}, a JSON merge patch: the members it names are the fields it sets.
func (f *face) update(w http.ResponseWriter, r *http.Request) error {
	id, err := f.rest.PathID(r, "id")
	if err != nil {
		return err
	}
	body, err := f.rest.ReadBody(r, restbody.MediaTypeMergePatch, restbody.MediaTypeJSON)
	if err != nil {
		return err
	}
	webhook, mask, err := restbody.WebhookMergePatch(body)
	if err != nil {
		return err
	}
	res, err := f.hooks.UpdateWebhook(r.Context(), &usersv1.UpdateWebhookRequest{Id: id, Webhook: webhook, UpdateMask: mask})
	if err != nil {
		return err
	}
	return f.writeMessage(w, r, http.StatusOK, res.GetWebhook())
}

func (f *face) delete(w http.ResponseWriter, r *http.Request) error {
	id, err := f.rest.PathID(r, "id")
	if err != nil {
		return err
	}
	if _, err := f.hooks.DeleteWebhook(r.Context(), &usersv1.DeleteWebhookRequest{Id: id}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// rotateSecret is POST /webhooks/{id}:rotateSecret: 200 with the subscription and its new secret.
// It takes no body, or one that is RotateWebhookSecretRequest.
func (f *face) rotateSecret(w http.ResponseWriter, r *http.Request) error {
	id, err := f.rest.PathID(r, "id")
	if err != nil {
		return err
	}
	req := &usersv1.RotateWebhookSecretRequest{}
	if err := f.decodeOptionalBody(r, req); err != nil {
		return err
	}
	if err := checkBodyID(req.GetId(), id); err != nil {
		return err
	}
	res, err := f.hooks.RotateWebhookSecret(r.Context(), &usersv1.RotateWebhookSecretRequest{Id: id})
	if err != nil {
		return err
	}
	return f.writeMessage(w, r, http.StatusOK, res.GetWebhook())
}

// replay is POST /webhooks/{id}:replay with {"afterSequence"}: 200 with the subscription, its
// deliveredSequence moved back.
func (f *face) replay(w http.ResponseWriter, r *http.Request) error {
	id, err := f.rest.PathID(r, "id")
	if err != nil {
		return err
	}
	body, err := f.rest.ReadBody(r, restbody.MediaTypeJSON)
	if err != nil {
		return err
	}
	req := &usersv1.ReplayWebhookRequest{}
	if err := codec.UnmarshalJSON(body, req); err != nil {
		return users.InvalidField("body", "%v", err)
	}
	// proto3 reads a missing afterSequence as 0, which sends again everything the log keeps: a
	// body that leaves it out is more likely a mistake than that.
	if !hasMember(body, "afterSequence", "after_sequence") {
		return users.InvalidField("afterSequence", "afterSequence is required: the sequence after which the changes are sent again (\"0\" for everything the log keeps)")
	}
	if err := checkBodyID(req.GetId(), id); err != nil {
		return err
	}
	req.Id = id
	res, err := f.hooks.ReplayWebhook(r.Context(), req)
	if err != nil {
		return err
	}
	return f.writeMessage(w, r, http.StatusOK, res.GetWebhook())
}

// listDeliveries is GET /webhooks/{id}/deliveries: the recent attempts, newest first, as a JSON
// array.
func (f *face) listDeliveries(w http.ResponseWriter, r *http.Request) error {
	id, err := f.rest.PathID(r, "id")
	if err != nil {
		return err
	}
	res, err := f.hooks.ListWebhookDeliveries(r.Context(), &usersv1.ListWebhookDeliveriesRequest{Id: id})
	if err != nil {
		return err
	}
	body, err := codec.MarshalJSONList(res.GetDeliveries())
	if err != nil {
		return err
	}
	return f.rest.WriteJSON(w, r, http.StatusOK, body)
}
