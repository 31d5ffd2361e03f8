package webhooks

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	usersv1 "usersd/gen/users/v1"
	"usersd/handlers/codec"
	"usersd/store"
	"usersd/users"
)

// eventTypes are the CloudEvents types of the kinds of change, as a subscription's types name them.
var eventTypes = map[store.EventKind]string{
	store.EventCreated:   "dev.usersd.user.created",
	store.EventUpdated:   "dev.usersd.user.updated",
	store.EventDeleted:   "dev.usersd.user.deleted",
	store.EventUndeleted: "dev.usersd.user.undeleted",
	store.EventPurged:    "dev.usersd.user.purged",
}

// knownType reports whether name is one of the types a subscription may name.
func knownType(name string) bool {
	for _, t := range eventTypes {
		if t == name {
			return true
		}
	}
	return false
}

// cloudEvent is a change as a CloudEvents 1.0 event in the structured JSON form.
type cloudEvent struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Time            string          `json:"time"`
	Subject         string          `json:"subject"`
	DataContentType string          `json:"datacontenttype"`
	Data            json.RawMessage `json:"data"`
	// Actor is an extension attribute: who made the change (an API key's name or a token's
	// subject), absent when the write named no one.
	Actor string `json:"actor,omitempty"`
	// ActorType says which of the two actor is: api_key or token.
	ActorType string `json:"actortype,omitempty"`
}

// eventBody is the body that delivers e: its data is the user as REST answers it (as the change
// left it; the id alone for a removal), its id the change's sequence, its time when it was made.
func eventBody(source string, e store.UserEvent) ([]byte, error) {
	m := users.EventToProto(e)
	data, err := codec.MarshalJSON(m.GetUser())
	if err != nil {
		return nil, fmt.Errorf("encode the user of change %d: %w", e.Sequence, err)
	}
	ce := cloudEvent{
		SpecVersion: "1.0", ID: strconv.FormatInt(e.Sequence, 10), Source: source, Type: eventTypes[e.Kind],
		Time: e.At.UTC().Format(time.RFC3339Nano), Subject: "users/" + strconv.Itoa(int(e.User.ID)),
		DataContentType: "application/json", Data: data, Actor: e.Actor.Name,
	}
	switch m.GetActorType() {
	case usersv1.UserEvent_ACTOR_TYPE_API_KEY:
		ce.ActorType = "api_key"
	case usersv1.UserEvent_ACTOR_TYPE_TOKEN:
		ce.ActorType = "token"
	}
	return json.Marshal(ce)
}
