// Conversions from stored records to the wire messages.
package users

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"
)

func userToProto(u store.User) *usersv1.User {
	m := &usersv1.User{
		Id:        u.ID,
		Name:      u.Name,
		Role:      u.Role,
		CreatedAt: timestamppb.New(u.CreatedAt),
		UpdatedAt: timestamppb.New(u.UpdatedAt),
		Etag:      ETag(u),
	}
	setIdentity(m, u.Identity)
	if u.Deleted() {
		m.DeleteTime, m.PurgeTime = timestamppb.New(u.DeleteTime), timestamppb.New(u.PurgeTime)
	}
	return m
}

func postToProto(p store.Post) *usersv1.Post {
	return &usersv1.Post{
		Id:        p.ID,
		UserId:    p.UserID,
		Title:     p.Title,
		Body:      p.Body,
		CreatedAt: timestamppb.New(p.CreatedAt),
	}
}

// mapSlice applies f to every element of in.
func mapSlice[T, U any](in []T, f func(T) U) []U {
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// actorTypes are the messages' types of actor; a type the log does not know is unspecified.
var actorTypes = map[store.ActorType]usersv1.UserEvent_ActorType{
	store.ActorAPIKey: usersv1.UserEvent_ACTOR_TYPE_API_KEY,
	store.ActorToken:  usersv1.UserEvent_ACTOR_TYPE_TOKEN,
}

// EventToProto is the message of a change: the user as the change left it (as deleted, for a
// delete that can be undone), the id alone for a removal, and who made it.
func EventToProto(e store.UserEvent) *usersv1.UserEvent {
	m := &usersv1.UserEvent{Sequence: e.Sequence, Actor: e.Actor.Name, ActorType: actorTypes[e.Actor.Type]}
	switch e.Kind {
	case store.EventCreated:
		m.Kind, m.User = usersv1.UserEvent_KIND_CREATED, userToProto(e.User)
	case store.EventUpdated:
		m.Kind, m.User = usersv1.UserEvent_KIND_UPDATED, userToProto(e.User)
	case store.EventDeleted:
		m.Kind, m.User = usersv1.UserEvent_KIND_DELETED, &usersv1.User{Id: e.User.ID}
		if e.User.Deleted() {
			m.User = userToProto(e.User)
		}
	case store.EventUndeleted:
		m.Kind, m.User = usersv1.UserEvent_KIND_UNDELETED, userToProto(e.User)
	case store.EventPurged:
		m.Kind, m.User = usersv1.UserEvent_KIND_PURGED, &usersv1.User{Id: e.User.ID}
	}
	if e.User.Name == "" {
		// Every user has a name: a change without one is of a user since deleted, whose name the
		// log forgot; it carries the id alone, as the delete does.
		m.User = &usersv1.User{Id: e.User.ID}
	}
	return m
}
