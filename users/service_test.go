package users

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/store/sqlstore"
)

// newSQLiteService returns a service on a fresh SQLite file, as the binary runs by default.
func newSQLiteService(t *testing.T) (*Service, *countingMetrics) {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := newCountingMetrics()
	s, err := New(Options{Store: st, Logger: slog.New(slog.DiscardHandler), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.EndWatches)
	return s, m
}

func TestACreateWithARequestIDRunsOncePerCaller(t *testing.T) {
	s, m := newSQLiteService(t)
	ada := WithCaller(context.Background(), Caller{ID: "ada"})
	req := &usersv1.CreateUserRequest{User: &usersv1.User{Name: "Ada", Role: "admin"}, RequestId: "k1"}
	// create creates as the caller of ctx, and says whether the answer was a replay.
	create := func(ctx context.Context, req *usersv1.CreateUserRequest) (*usersv1.CreateUserResponse, bool, error) {
		call := &Call{}
		res, err := s.CreateUser(WithCall(ctx, call), req)
		return res, call.Replayed, err
	}
	first, replayed, err := create(ada, req)
	if err != nil || replayed {
		t.Fatalf("first: %v, replayed %v", err, replayed)
	}
	again, replayed, err := create(ada, proto.Clone(req).(*usersv1.CreateUserRequest))
	if err != nil || !replayed || !proto.Equal(again, first) {
		t.Fatalf("repeat: %v, replayed %v, %v; want the first answer %v, replayed", err, replayed, again, first)
	}
	if m.replays != 1 {
		t.Errorf("%d replays counted, want 1", m.replays)
	}
	other := proto.Clone(req).(*usersv1.CreateUserRequest)
	other.User.Name = "Grace"
	_, _, err = create(ada, other)
	wantCode(t, "the key with another request", err, connect.CodeFailedPrecondition, ReasonRequestMismatch)
	if m.refused["reused"] != 1 {
		t.Errorf("reused counted %d times, want 1", m.refused["reused"])
	}
	// The key is the caller's: another caller's same key is another request.
	bob := WithCaller(context.Background(), Caller{ID: "bob"})
	theirs, replayed, err := create(bob, proto.Clone(req).(*usersv1.CreateUserRequest))
	if err != nil || replayed || theirs.GetUser().GetId() == first.GetUser().GetId() {
		t.Fatalf("another caller's key: %v, replayed %v, user %d", err, replayed, theirs.GetUser().GetId())
	}
	// Without a caller a key has no owner: that is a bug of the face that called, not a client error.
	if _, _, err := create(context.Background(), req); err == nil || connectCode(err) != connect.CodeUnknown {
		t.Fatalf("a key without a caller: %v, want a fault", err)
	}
}

func TestAStaleEtagFailsEveryWriteWithAbortedAndChangesNothing(t *testing.T) {
	s, _ := newSQLiteService(t)
	ctx := context.Background()
	created, err := s.CreateUser(ctx, &usersv1.CreateUserRequest{User: &usersv1.User{Name: "Ada"}})
	if err != nil {
		t.Fatal(err)
	}
	id, stale := created.GetUser().GetId(), created.GetUser().GetEtag()
	if _, err := s.UpdateUser(ctx, &usersv1.UpdateUserRequest{Id: id, User: &usersv1.User{Role: "admin"}, Etag: stale}); err != nil {
		t.Fatal(err)
	}
	for name, write := range map[string]func() error{
		"replace": func() error {
			_, err := s.ReplaceUser(ctx, &usersv1.ReplaceUserRequest{Id: id, User: &usersv1.User{Name: "X"}, Etag: stale})
			return err
		},
		"update": func() error {
			_, err := s.UpdateUser(ctx, &usersv1.UpdateUserRequest{Id: id, User: &usersv1.User{Name: "X"}, Etag: stale})
			return err
		},
		"an update that changes nothing": func() error {
			_, err := s.UpdateUser(ctx, &usersv1.UpdateUserRequest{Id: id, UpdateMask: &fieldmaskpb.FieldMask{}, Etag: stale})
			return err
		},
		"delete": func() error {
			_, err := s.DeleteUser(ctx, &usersv1.DeleteUserRequest{Id: id, Etag: stale})
			return err
		},
	} {
		wantCode(t, name, write(), connect.CodeAborted, ReasonEtagMismatch)
	}
	got, err := s.GetUser(ctx, &usersv1.GetUserRequest{Id: id})
	if err != nil || got.GetName() != "Ada" || got.GetRole() != "admin" {
		t.Fatalf("after the refused writes: %v, %v; want Ada the admin", got, err)
	}
}

func TestAMissingUserIsNotFoundWhateverTheCondition(t *testing.T) {
	s, _ := newSQLiteService(t)
	for _, etag := range []string{"", "*", `"1"`} {
		_, err := s.DeleteUser(context.Background(), &usersv1.DeleteUserRequest{Id: 99, Etag: etag})
		wantCode(t, "delete 99 if "+etag, err, connect.CodeNotFound)
	}
}

func TestAListFilterNoUserCanMatchIsRefusedOnEveryBackend(t *testing.T) {
	s, _ := newSQLiteService(t)
	for _, req := range []*usersv1.ListUsersRequest{
		{Role: "\x00"}, {Role: "admin\x00"}, {Role: "a\xffb"}, {Role: strings.Repeat("r", maxRoleLength+1)},
		{NamePrefix: "\x00"}, {NamePrefix: "a\xffb"},
	} {
		_, err := s.ListUsers(context.Background(), req)
		wantCode(t, fmt.Sprintf("list with role %q, name prefix %q", req.GetRole(), req.GetNamePrefix()), err, connect.CodeInvalidArgument)
	}
}
