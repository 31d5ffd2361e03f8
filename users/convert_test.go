package users

import (
	"testing"

	"google.golang.org/protobuf/proto"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"
)

func TestAChangeOfAUserSinceDeletedCarriesTheIDAlone(t *testing.T) {
	for _, kind := range []store.EventKind{store.EventCreated, store.EventUpdated, store.EventDeleted} {
		// The log keeps such a change without the name (see store/storetest, "every write of a user is one change").
		m := EventToProto(store.UserEvent{Sequence: 7, Kind: kind, User: store.User{ID: 3, Role: "admin", Version: 2}})
		if !proto.Equal(m.GetUser(), &usersv1.User{Id: 3}) {
			t.Errorf("%s of a user since deleted: %v, want the id alone", kind, m.GetUser())
		}
	}
	kept := EventToProto(store.UserEvent{Sequence: 8, Kind: store.EventCreated, User: store.User{ID: 4, Name: "Ada", Version: 1}})
	if kept.GetUser().GetName() != "Ada" || kept.GetUser().GetEtag() == "" {
		t.Errorf("the create of a user still there: %v, want the whole user", kept.GetUser())
	}
}
