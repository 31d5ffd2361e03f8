package handlers

import (
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/users"
)

// TestBatchesOverRPC: the batch methods on every RPC protocol, with the same answers and errors
// as REST's.
func TestBatchesOverRPC(t *testing.T) {
	s := startServerWith(t, Config{DeletedRetention: softDeleteRetention})
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			c := s.RPCClient(p, apitest.Key)
			ctx := t.Context()
			watch := apitest.StartWatch(t, s.Server, apitest.WatchProtocols()[0], -1, "")
			tag := strings.ReplaceAll(p.Name, " ", "-")
			req := &usersv1.BatchCreateUsersRequest{RequestId: "batch-" + tag, Requests: []*usersv1.CreateUserRequest{
				{User: &usersv1.User{Name: "Ada " + p.Name, UserName: "ada-" + tag}},
				{User: &usersv1.User{Name: "Bob " + p.Name, Role: "admin"}},
				{User: &usersv1.User{Name: "Cy " + p.Name}},
			}}
			created, err := c.BatchCreateUsers(ctx, req)
			apitest.RPCMust(t, "BatchCreateUsers", err)
			var ids []int32
			var changes []apitest.Change
			for i, u := range created.GetUsers() {
				if u.GetName() != req.GetRequests()[i].GetUser().GetName() || u.GetEtag() == "" {
					t.Fatalf("created user %d: %v", i, u)
				}
				ids = append(ids, u.GetId())
				changes = append(changes, apitest.Change{Kind: usersv1.UserEvent_KIND_CREATED, ID: u.GetId(), Name: u.GetName()})
			}
			watch.WantChanges(t, changes...)
			again, err := c.BatchCreateUsers(ctx, req)
			apitest.RPCMust(t, "BatchCreateUsers again", err)
			if !proto.Equal(again, created) {
				t.Errorf("a retry with the batch's request_id answered %v, want the first answer %v", again, created)
			}
			req.Requests = req.Requests[:1]
			if _, err := c.BatchCreateUsers(ctx, req); connect.CodeOf(err) != connect.CodeFailedPrecondition {
				t.Errorf("another batch with the request_id: %v; want failed precondition", err)
			}

			read, err := c.BatchGetUsers(ctx, &usersv1.BatchGetUsersRequest{Ids: []int32{ids[1], ids[1], ids[0]}})
			apitest.RPCMust(t, "BatchGetUsers", err)
			if got := read.GetUsers(); len(got) != 3 || got[0].GetId() != ids[1] || got[1].GetId() != ids[1] || got[2].GetId() != ids[0] {
				t.Errorf("BatchGetUsers of %d, %d, %d: %v", ids[1], ids[1], ids[0], got)
			}
			_, err = c.BatchGetUsers(ctx, &usersv1.BatchGetUsersRequest{Ids: []int32{ids[0], 9998, 9999}})
			wantRPCError(t, p.Name, err, connect.CodeNotFound, "USER_NOT_FOUND", map[string]string{"id": "9998"})

			_, err = c.BatchCreateUsers(ctx, &usersv1.BatchCreateUsersRequest{Requests: []*usersv1.CreateUserRequest{
				{User: &usersv1.User{Name: "D"}}, {User: &usersv1.User{Name: "E", Email: "no at sign"}},
			}})
			wantRPCError(t, p.Name, err, connect.CodeInvalidArgument, "INVALID_FIELD", map[string]string{"field": "requests[1].user.email"})
			_, err = c.BatchCreateUsers(ctx, &usersv1.BatchCreateUsersRequest{Requests: []*usersv1.CreateUserRequest{
				{User: &usersv1.User{Name: "D"}}, {User: &usersv1.User{Name: "E", UserName: "ADA-" + tag}},
			}})
			wantRPCError(t, p.Name, err, connect.CodeAlreadyExists, "ALREADY_EXISTS", map[string]string{"field": "requests[1].user.user_name"})
			tooMany := &usersv1.BatchCreateUsersRequest{}
			for range users.MaxBatchSize + 1 {
				tooMany.Requests = append(tooMany.Requests, &usersv1.CreateUserRequest{User: &usersv1.User{Name: "x"}})
			}
			_, err = c.BatchCreateUsers(ctx, tooMany)
			wantRPCError(t, p.Name, err, connect.CodeInvalidArgument, "INVALID_FIELD", map[string]string{"field": "requests"})

			_, err = c.BatchDeleteUsers(ctx, &usersv1.BatchDeleteUsersRequest{Ids: []int32{ids[0], 9999}})
			wantRPCError(t, p.Name, err, connect.CodeNotFound, "USER_NOT_FOUND", map[string]string{"id": "9999"})
			_, err = c.BatchDeleteUsers(ctx, &usersv1.BatchDeleteUsersRequest{Ids: make([]int32, users.MaxBatchSize+1)})
			wantRPCError(t, p.Name, err, connect.CodeInvalidArgument, "INVALID_FIELD", map[string]string{"field": "ids"})
			deleted, err := c.BatchDeleteUsers(ctx, &usersv1.BatchDeleteUsersRequest{Ids: []int32{ids[2], ids[0]}})
			apitest.RPCMust(t, "BatchDeleteUsers", err)
			if got := deleted.GetUsers(); len(got) != 2 || got[0].GetId() != ids[2] || !aboutRetention(got[1].GetPurgeTime().AsTime().Sub(got[1].GetDeleteTime().AsTime())) {
				t.Errorf("BatchDeleteUsers answered %v", got)
			}
			watch.WantChanges(t,
				apitest.Change{Kind: usersv1.UserEvent_KIND_DELETED, ID: ids[2], Name: "Cy " + p.Name},
				apitest.Change{Kind: usersv1.UserEvent_KIND_DELETED, ID: ids[0], Name: "Ada " + p.Name})
			if _, err := c.BatchGetUsers(ctx, &usersv1.BatchGetUsersRequest{Ids: []int32{ids[1], ids[0]}}); connect.CodeOf(err) != connect.CodeNotFound {
				t.Errorf("BatchGetUsers of a deleted user: %v", err)
			}
		})
	}
}

// TestABatchDeleteWithoutRetentionRemovesAtOnce: on a server that keeps no deleted users, a batch
// delete removes them, and answers no users.
func TestABatchDeleteWithoutRetentionRemovesAtOnce(t *testing.T) {
	s := startServer(t)
	c := s.RPCClient(apitest.RPCProtocols[0], apitest.Key)
	a, b := apitest.RPCCreate(t, c, "a", ""), apitest.RPCCreate(t, c, "b", "")
	res, err := c.BatchDeleteUsers(t.Context(), &usersv1.BatchDeleteUsersRequest{Ids: []int32{a.GetId(), b.GetId()}})
	apitest.RPCMust(t, "BatchDeleteUsers", err)
	if len(res.GetUsers()) != 0 {
		t.Errorf("BatchDeleteUsers without retention answered %v, want no users", res.GetUsers())
	}
	if listsUser(t, c, a.GetId(), true) || listsUser(t, c, b.GetId(), true) {
		t.Error("a user deleted without retention is still listed among the deleted")
	}
}

// wantRPCError checks err's code and its ErrorInfo (reason and metadata).
func wantRPCError(t *testing.T, protocol string, err error, code connect.Code, reason string, metadata map[string]string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != code {
		t.Fatalf("%s: %v; want %v", protocol, err, code)
	}
	wantDetails(t, protocol, ce, reason, metadata)
}
