package users

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"

	"usersd/store"
)

// TestFindUsersRefusesTheSortsNoIndexServes: a sort by user name is served alone, a sort key that
// is not one of the sort fields not at all; each is the caller's invalid argument, never a fault.
func TestFindUsersRefusesTheSortsNoIndexServes(t *testing.T) {
	s, _ := newSQLiteService(t)
	for _, sort := range [][]store.SortKey{
		{{Field: store.SortByName}, {Field: store.SortByUserName}},
		{{Field: store.SortByUserName}, {Field: store.SortByID, Descending: true}},
		{{Field: "nickName"}},
	} {
		_, _, err := s.FindUsers(context.Background(), FindQuery{Sort: sort, Limit: 10})
		var e *Error
		if !errors.As(err, &e) || e.code != connect.CodeInvalidArgument {
			t.Errorf("sort %v: %v, want an invalid argument", sort, err)
		}
	}
	if _, _, err := s.FindUsers(context.Background(), FindQuery{Sort: []store.SortKey{{Field: store.SortByUserName, Descending: true}}, Limit: 10}); err != nil {
		t.Errorf("a sort by user name alone: %v", err)
	}
}
