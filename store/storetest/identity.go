package storetest

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"usersd/store"
)

// adaIdentity is a full identity, for the cases below.
var adaIdentity = store.Identity{
	UserName: "Ada.L", GivenName: "Ada", FamilyName: "Lovelace", Email: "Ada@Example.com",
	ExternalID: "ext-1", Inactive: true, Labels: map[string]string{"team": "engine", "dept": "math"},
}

// testIdentityRoundTrip: every identity field is stored as given and reads back from a get, a
// list, an update's answer and the change log; a user created without one is active with none.
func testIdentityRoundTrip(t *testing.T, s store.Store) {
	ctx := context.Background()
	plain, err := s.CreateUser(ctx, store.NewUser{Name: "Plain"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plain.Identity, store.Identity{}) {
		t.Fatalf("a user created without an identity has %+v, want none and active", plain.Identity)
	}
	ada, err := s.CreateUser(ctx, store.NewUser{Name: "Ada", Identity: adaIdentity}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetUser(ctx, ada.ID)
	if err != nil || !reflect.DeepEqual(got.Identity, adaIdentity) || !reflect.DeepEqual(ada.Identity, adaIdentity) {
		t.Fatalf("created %+v, read %+v (%v); want %+v", ada.Identity, got.Identity, err, adaIdentity)
	}
	page, err := s.ListUsers(ctx, store.UserQuery{Limit: 10})
	if err != nil || len(page.Items) != 2 || !reflect.DeepEqual(page.Items[1].Identity, adaIdentity) {
		t.Fatalf("listed %+v (%v), want Ada's identity", page.Items, err)
	}

	given, active := "Augusta", false
	updated, err := s.UpdateUser(ctx, ada.ID, store.UserChanges{GivenName: &given, Inactive: &active}, nil)
	want := adaIdentity
	want.GivenName, want.Inactive = given, false
	if err != nil || !reflect.DeepEqual(updated.Identity, want) {
		t.Fatalf("updated to %+v (%v), want %+v: the fields not named stay", updated.Identity, err, want)
	}
	events := readEvents(t, s, 0, 10)
	if len(events) != 3 || !reflect.DeepEqual(events[1].User.Identity, adaIdentity) || !reflect.DeepEqual(events[2].User.Identity, want) {
		t.Fatalf("the log holds %+v, want each change with the identity it left", events)
	}

	empty, none := "", map[string]string{}
	cleared, err := s.UpdateUser(ctx, ada.ID, store.UserChanges{UserName: &empty, Email: &empty, ExternalID: &empty, Labels: &none}, nil)
	if err != nil || cleared.UserName != "" || cleared.Email != "" || cleared.ExternalID != "" || len(cleared.Labels) != 0 {
		t.Fatalf("cleared to %+v (%v), want no user name, email, external id or labels", cleared.Identity, err)
	}
}

// testIdentityUnique: user_name and email are unique ignoring case, external_id exactly, each among
// non-empty values; a clash on create or update is Taken naming the field and writes nothing.
func testIdentityUnique(t *testing.T, s store.Store) {
	ctx := context.Background()
	ada, err := s.CreateUser(ctx, store.NewUser{Name: "Ada", Identity: adaIdentity}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		field    string
		identity store.Identity
	}{
		{"user_name", store.Identity{UserName: "ADA.l"}},
		{"email", store.Identity{Email: "ada@EXAMPLE.COM"}},
		{"external_id", store.Identity{ExternalID: "ext-1"}},
	} {
		_, err := s.CreateUser(ctx, store.NewUser{Name: "Copy", Identity: c.identity}, nil)
		var taken store.Taken
		if !errors.Is(err, store.ErrAlreadyExists) || !errors.As(err, &taken) || taken.Field != c.field {
			t.Fatalf("a create with Ada's %s: %v, want Taken{%s}", c.field, err, c.field)
		}
	}
	// Exact for the external id; empty values never clash.
	for _, identity := range []store.Identity{{ExternalID: "EXT-1"}, {}, {}} {
		if _, err := s.CreateUser(ctx, store.NewUser{Name: "Other", Identity: identity}, nil); err != nil {
			t.Fatalf("a create with %+v: %v, want it stored", identity, err)
		}
	}
	bob, err := s.CreateUser(ctx, store.NewUser{Name: "Bob"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clash := "ada.L"
	_, err = s.UpdateUser(ctx, bob.ID, store.UserChanges{UserName: &clash}, nil)
	var taken store.Taken
	if !errors.As(err, &taken) || taken.Field != "user_name" {
		t.Fatalf("an update to Ada's user name: %v, want Taken{user_name}", err)
	}
	if after, err := s.GetUser(ctx, bob.ID); err != nil || after.Version != bob.Version || after.UserName != "" {
		t.Fatalf("Bob after a refused update: %+v (%v), want unchanged", after, err)
	}
	// Ada may keep her own values, and once she lets one go another user may take it.
	if _, err := s.UpdateUser(ctx, ada.ID, store.UserChanges{UserName: &clash}, nil); err != nil {
		t.Fatalf("Ada's change of case of her own user name: %v", err)
	}
	empty := ""
	if _, err := s.UpdateUser(ctx, ada.ID, store.UserChanges{UserName: &empty}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateUser(ctx, bob.ID, store.UserChanges{UserName: &clash}, nil); err != nil {
		t.Fatalf("a user name let go: %v, want it free", err)
	}
}

// testIdentityRace: of concurrent creates with one user name, whatever their batches, exactly one
// is stored and every other is Taken.
func testIdentityRace(t *testing.T, s store.Store) {
	ctx := context.Background()
	const racers = 8
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			_, errs[i] = s.CreateUser(ctx, store.NewUser{Name: "Racer", Identity: store.Identity{UserName: "racer"}}, nil)
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrAlreadyExists):
			t.Fatalf("a racing create: %v, want stored or Taken", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d racing creates were stored, want exactly 1", won)
	}
}

// testLabelChanges: a patch of labels merges key by key with the stored ones, on top of a
// replacement when there is one, and may not leave more than store.MaxLabels.
func testLabelChanges(t *testing.T, s store.Store) {
	ctx := context.Background()
	u, err := s.CreateUser(ctx, store.NewUser{Name: "Ada", Identity: store.Identity{Labels: map[string]string{"a": "1", "b": "2"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	three := "3"
	u, err = s.UpdateUser(ctx, u.ID, store.UserChanges{LabelChanges: map[string]*string{"a": nil, "c": &three}}, nil)
	if want := map[string]string{"b": "2", "c": "3"}; err != nil || !reflect.DeepEqual(u.Labels, want) {
		t.Fatalf("merged into %v (%v), want %v", u.Labels, err, want)
	}
	many := map[string]*string{}
	for _, k := range []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11", "k12", "k13", "k14", "k15",
		"k16", "k17", "k18", "k19", "k20", "k21", "k22", "k23", "k24", "k25", "k26", "k27", "k28", "k29", "k30"} {
		many[k] = &three
	}
	if _, err := s.UpdateUser(ctx, u.ID, store.UserChanges{LabelChanges: many}, nil); !errors.Is(err, store.ErrTooManyLabels) {
		t.Fatalf("a merge to 33 labels: %v, want ErrTooManyLabels", err)
	}
	if after, err := s.GetUser(ctx, u.ID); err != nil || after.Version != u.Version {
		t.Fatalf("after a refused merge: %+v (%v), want unchanged", after, err)
	}
	only := map[string]string{"z": "26"}
	u, err = s.UpdateUser(ctx, u.ID, store.UserChanges{Labels: &only, LabelChanges: map[string]*string{"y": &three}}, nil)
	if want := map[string]string{"y": "3", "z": "26"}; err != nil || !reflect.DeepEqual(u.Labels, want) {
		t.Fatalf("replaced and merged into %v (%v), want %v", u.Labels, err, want)
	}
}

// testDeleteForgetsIdentity: the log forgets a deleted user's identity with the name.
func testDeleteForgetsIdentity(t *testing.T, s store.Store) {
	ctx := context.Background()
	u, err := s.CreateUser(ctx, store.NewUser{Name: "Ada", Identity: adaIdentity}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(ctx, u.ID, nil); err != nil {
		t.Fatal(err)
	}
	for _, e := range readEvents(t, s, 0, 10) {
		if id := e.User.Identity; id.UserName != "" || id.Email != "" || id.ExternalID != "" || id.GivenName != "" || id.FamilyName != "" || len(id.Labels) != 0 {
			t.Fatalf("the log keeps %+v of a deleted user", id)
		}
	}
}
