package handlers

// docs/API.md#safe-retries-and-concurrent-edits over RPC: an etag makes ReplaceUser, UpdateUser and DeleteUser conditional, and a
// request_id makes CreateUser and CreateUserPost run at most once per caller and key.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/internal/apitest"
)

// rpcEtagWrite is one of the writes that an etag guards, making a change that shows when it happens.
type rpcEtagWrite struct {
	name    string
	deletes bool
	// write sends the write with etag and returns the user it answers (nil for DeleteUser).
	write func(ctx context.Context, c usersv1connect.UsersClient, id int32, etag string) (*usersv1.User, error)
	// changed reports whether u shows the write's change.
	changed func(u *usersv1.User) bool
}

var rpcEtagWrites = []rpcEtagWrite{
	{
		name: "ReplaceUser",
		write: func(ctx context.Context, c usersv1connect.UsersClient, id int32, etag string) (*usersv1.User, error) {
			res, err := c.ReplaceUser(ctx, &usersv1.ReplaceUserRequest{Id: id, User: &usersv1.User{Name: "Replaced", Role: "replacer"}, Etag: etag})
			return res.GetUser(), err
		},
		changed: func(u *usersv1.User) bool { return u.GetName() == "Replaced" && u.GetRole() == "replacer" },
	},
	{
		name: "UpdateUser",
		write: func(ctx context.Context, c usersv1connect.UsersClient, id int32, etag string) (*usersv1.User, error) {
			res, err := c.UpdateUser(ctx, &usersv1.UpdateUserRequest{Id: id, User: &usersv1.User{Role: "updater"},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"role"}}, Etag: etag})
			return res.GetUser(), err
		},
		changed: func(u *usersv1.User) bool { return u.GetRole() == "updater" },
	},
	{
		name:    "DeleteUser",
		deletes: true,
		write: func(ctx context.Context, c usersv1connect.UsersClient, id int32, etag string) (*usersv1.User, error) {
			_, err := c.DeleteUser(ctx, &usersv1.DeleteUserRequest{Id: id, Etag: etag})
			return nil, err
		},
	},
}

// rpcWrittenUser creates a user and writes it once without an etag, so that its etag is "2" and "1"
// is the stale etag of a client that read it before that write.
func rpcWrittenUser(t *testing.T, c usersv1connect.UsersClient) *usersv1.User {
	t.Helper()
	u := apitest.RPCCreate(t, c, "Etta", "reader")
	res, err := c.UpdateUser(t.Context(), &usersv1.UpdateUserRequest{Id: u.GetId(), User: &usersv1.User{Role: "writer"}})
	apitest.RPCMust(t, "UpdateUser without an etag", err)
	apitest.RPCWantEtag(t, res.GetUser(), 2)
	return res.GetUser()
}

// rpcWantUnchanged fails the test unless the user reads back exactly as before, etag included.
func rpcWantUnchanged(t *testing.T, c usersv1connect.UsersClient, before *usersv1.User) {
	t.Helper()
	if got := apitest.RPCGet(t, c, before.GetId()); !proto.Equal(got, before) {
		t.Fatalf("a refused write changed the user to %v, want %v", got, before)
	}
}

// rpcMissingUserID returns the id of a user that existed and was deleted: ids are never reused, so it
// names no user, yet it is an id that a client could have read.
func rpcMissingUserID(t *testing.T, c usersv1connect.UsersClient) int32 {
	t.Helper()
	u := apitest.RPCCreate(t, c, "Gone", "")
	_, err := c.DeleteUser(t.Context(), &usersv1.DeleteUserRequest{Id: u.GetId()})
	apitest.RPCMust(t, "DeleteUser", err)
	return u.GetId()
}

func TestRPCEtagsMakeWritesConditional(t *testing.T) {
	// Every case starts from a user whose etag is "2" (see rpcWrittenUser); want 0 means the write
	// happens. The value is read like an If-Match header: strong comparison, so weak tags and tags
	// that are not exactly ours match nothing (aborted), and what does not parse is invalid_argument.
	conditions := []struct {
		name, etag string
		want       connect.Code
	}{
		{"the current etag", `"2"`, 0},
		{"*", `*`, 0},
		{"a list that holds the current etag", `"1", "2"`, 0},
		{"a list with spaces and empty elements around the current etag", ` ,"9",, "2" `, 0},
		{"a stale etag", `"1"`, connect.CodeAborted},
		{"an etag the user has not reached", `"3"`, connect.CodeAborted},
		{"a list of etags none of which is current", `"1", "3"`, connect.CodeAborted},
		{"the weak form of the current etag", `W/"2"`, connect.CodeAborted},
		{"the current version with a leading zero", `"02"`, connect.CodeAborted},
		{"a quoted star", `"*"`, connect.CodeAborted},
		{"an unquoted version", `2`, connect.CodeInvalidArgument},
		{"an unterminated tag", `"2`, connect.CodeInvalidArgument},
		{"two tags without a comma", `"1" "2"`, connect.CodeInvalidArgument},
		{"a lowercase weak prefix", `w/"2"`, connect.CodeInvalidArgument},
		{"only commas", `,`, connect.CodeInvalidArgument},
	}
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			s := startServer(t)
			c := s.RPCClient(p, apitest.Key)
			for _, w := range rpcEtagWrites {
				for _, cond := range conditions {
					verdict := "happens"
					if cond.want != 0 {
						verdict = "is " + cond.want.String() + " and changes nothing"
					}
					t.Run(fmt.Sprintf("%s with %s (%s) %s", w.name, cond.name, cond.etag, verdict), func(t *testing.T) {
						before := rpcWrittenUser(t, c)
						got, err := w.write(t.Context(), c, before.GetId(), cond.etag)
						if cond.want != 0 {
							apitest.RPCWantCode(t, err, cond.want)
							rpcWantUnchanged(t, c, before)
							return
						}
						apitest.RPCMust(t, w.name, err)
						if w.deletes {
							_, err := c.GetUser(t.Context(), &usersv1.GetUserRequest{Id: before.GetId()})
							apitest.RPCWantCode(t, err, connect.CodeNotFound)
							return
						}
						if !w.changed(got) {
							t.Fatalf("%s answered %v, without its change", w.name, got)
						}
						if got.GetEtag() == before.GetEtag() {
							t.Fatalf("the etag stayed %s after a write", got.GetEtag())
						}
						apitest.RPCWantEtag(t, got, 3)
						if stored := apitest.RPCGet(t, c, before.GetId()); !proto.Equal(stored, got) {
							t.Fatalf("%s answered %v, GetUser reads %v", w.name, got, stored)
						}
					})
				}
			}

			// RFC 9110 section 13.2.1: a missing resource is answered as missing whatever the condition.
			for _, w := range rpcEtagWrites {
				for _, etag := range []string{`"1"`, `*`} {
					t.Run(fmt.Sprintf("%s of a missing user with etag %s is not_found", w.name, etag), func(t *testing.T) {
						_, err := w.write(t.Context(), c, rpcMissingUserID(t, c), etag)
						apitest.RPCWantCode(t, err, connect.CodeNotFound)
					})
				}
			}

			// An UpdateUser that changes nothing writes nothing, but its etag is still checked: a
			// client must not be told its stale view is current.
			noChanges := []struct {
				name string
				user *usersv1.User
				mask *fieldmaskpb.FieldMask
			}{
				{"an empty update_mask", &usersv1.User{Name: "Ignored", Role: "ignored"}, &fieldmaskpb.FieldMask{}},
				{"no update_mask and no fields", &usersv1.User{}, nil},
			}
			for _, nc := range noChanges {
				update := func(ctx context.Context, id int32, etag string) (*usersv1.User, error) {
					res, err := c.UpdateUser(ctx, &usersv1.UpdateUserRequest{Id: id, User: nc.user, UpdateMask: nc.mask, Etag: etag})
					return res.GetUser(), err
				}
				t.Run("UpdateUser with "+nc.name+" and the current etag answers the user unchanged", func(t *testing.T) {
					before := rpcWrittenUser(t, c)
					got, err := update(t.Context(), before.GetId(), before.GetEtag())
					apitest.RPCMust(t, "UpdateUser", err)
					if !proto.Equal(got, before) {
						t.Fatalf("UpdateUser answered %v, want the user unchanged %v", got, before)
					}
					rpcWantUnchanged(t, c, before)
				})
				refusals := []struct {
					etag string
					want connect.Code
				}{{`"1"`, connect.CodeAborted}, {`W/"2"`, connect.CodeAborted}, {`2`, connect.CodeInvalidArgument}}
				for _, r := range refusals {
					t.Run(fmt.Sprintf("UpdateUser with %s and etag %s is %s", nc.name, r.etag, r.want), func(t *testing.T) {
						before := rpcWrittenUser(t, c)
						_, err := update(t.Context(), before.GetId(), r.etag)
						apitest.RPCWantCode(t, err, r.want)
						rpcWantUnchanged(t, c, before)
					})
				}
				t.Run("UpdateUser with "+nc.name+" of a missing user with an etag is not_found", func(t *testing.T) {
					_, err := update(t.Context(), rpcMissingUserID(t, c), `"1"`)
					apitest.RPCWantCode(t, err, connect.CodeNotFound)
				})
			}
		})
	}
}

// Two clients that read the same user race to write it: only the first write wins, and the loser
// must read again. Each write's answer carries the etag that the next write must send.
func TestRPCEtagsStopLostUpdates(t *testing.T) {
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			s := startServer(t)
			c := s.RPCClient(p, apitest.Key)
			u := apitest.RPCCreate(t, c, "Lou", "first")
			read := u.GetEtag() // what both clients read

			res, err := c.UpdateUser(t.Context(), &usersv1.UpdateUserRequest{Id: u.GetId(), User: &usersv1.User{Role: "winner"}, Etag: read})
			apitest.RPCMust(t, "the first client's UpdateUser", err)
			won := res.GetUser()
			apitest.RPCWantEtag(t, won, 2)

			_, err = c.ReplaceUser(t.Context(), &usersv1.ReplaceUserRequest{Id: u.GetId(), User: &usersv1.User{Name: "Loser"}, Etag: read})
			apitest.RPCWantCode(t, err, connect.CodeAborted)
			_, err = c.DeleteUser(t.Context(), &usersv1.DeleteUserRequest{Id: u.GetId(), Etag: read})
			apitest.RPCWantCode(t, err, connect.CodeAborted)
			rpcWantUnchanged(t, c, won)

			// The loser reads again, over REST this time: the ETag header is the same string as the
			// etag field, so it works as the RPC's etag.
			rest := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: fmt.Sprintf("/users/%d", u.GetId())})
			if rest.Status != http.StatusOK || rest.Header.Get("ETag") != won.GetEtag() {
				t.Fatalf("REST GET: %d with ETag %q, want 200 with %q", rest.Status, rest.Header.Get("ETag"), won.GetEtag())
			}
			replaced, err := c.ReplaceUser(t.Context(), &usersv1.ReplaceUserRequest{Id: u.GetId(), User: &usersv1.User{Name: "Loser"}, Etag: rest.Header.Get("ETag")})
			apitest.RPCMust(t, "ReplaceUser with the etag read again", err)
			apitest.RPCWantEtag(t, replaced.GetUser(), 3)

			_, err = c.DeleteUser(t.Context(), &usersv1.DeleteUserRequest{Id: u.GetId(), Etag: won.GetEtag()})
			apitest.RPCWantCode(t, err, connect.CodeAborted)
			rpcWantUnchanged(t, c, replaced.GetUser())
			_, err = c.DeleteUser(t.Context(), &usersv1.DeleteUserRequest{Id: u.GetId(), Etag: replaced.GetUser().GetEtag()})
			apitest.RPCMust(t, "DeleteUser with the current etag", err)
			_, err = c.GetUser(t.Context(), &usersv1.GetUserRequest{Id: u.GetId()})
			apitest.RPCWantCode(t, err, connect.CodeNotFound)
		})
	}
}

// rpcReplayedHeader marks an answer that repeats a kept one.
const rpcReplayedHeader = "Idempotent-Replayed"

// rpcKeyedCreate is one of the two creates that take a request_id. owner is the user that
// CreateUserPost posts to (CreateUser ignores it); content is the name or the title, the part of the
// request that a test changes to make it another request.
type rpcKeyedCreate struct {
	name  string
	call  func(ctx context.Context, c usersv1connect.UsersClient, owner int32, requestID, content string) (proto.Message, error)
	count func(t *testing.T, c usersv1connect.UsersClient, owner int32) int32 // how many there are
}

var rpcKeyedCreates = []rpcKeyedCreate{
	{
		name: "CreateUser",
		call: func(ctx context.Context, c usersv1connect.UsersClient, _ int32, requestID, content string) (proto.Message, error) {
			res, err := c.CreateUser(ctx, &usersv1.CreateUserRequest{User: &usersv1.User{Name: content, Role: "keyed"}, RequestId: requestID})
			if err != nil {
				return nil, err
			}
			return res, nil
		},
		count: func(t *testing.T, c usersv1connect.UsersClient, _ int32) int32 {
			t.Helper()
			res, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{})
			apitest.RPCMust(t, "ListUsers", err)
			return res.GetTotalCount()
		},
	},
	{
		name: "CreateUserPost",
		call: func(ctx context.Context, c usersv1connect.UsersClient, owner int32, requestID, content string) (proto.Message, error) {
			res, err := c.CreateUserPost(ctx, &usersv1.CreateUserPostRequest{UserId: owner,
				Post: &usersv1.Post{Title: content, Body: "body"}, RequestId: requestID})
			if err != nil {
				return nil, err
			}
			return res, nil
		},
		count: func(t *testing.T, c usersv1connect.UsersClient, owner int32) int32 {
			t.Helper()
			res, err := c.ListUserPosts(t.Context(), &usersv1.ListUserPostsRequest{UserId: owner})
			apitest.RPCMust(t, "ListUserPosts", err)
			return res.GetTotalCount()
		},
	},
}

// send makes the create and returns its answer and the answer's Idempotent-Replayed header, "" when
// it has none. It does not use t, so that it can run in a goroutine.
func (k rpcKeyedCreate) send(ctx context.Context, c usersv1connect.UsersClient, owner int32, requestID, content string) (proto.Message, string, error) {
	ctx, info := connect.NewClientContext(ctx)
	msg, err := k.call(ctx, c, owner, requestID, content)
	return msg, info.ResponseHeader().Get(rpcReplayedHeader), err
}

// mustCreate makes the create, which must run: it succeeds and is not a replay.
func (k rpcKeyedCreate) mustCreate(t *testing.T, c usersv1connect.UsersClient, owner int32, requestID, content string) proto.Message {
	t.Helper()
	msg, replayed, err := k.send(t.Context(), c, owner, requestID, content)
	apitest.RPCMust(t, k.name, err)
	if replayed != "" {
		t.Fatalf("%s %q with request_id %.20q: a first call answered Idempotent-Replayed %q", k.name, content, requestID, replayed)
	}
	return msg
}

// mustReplay makes the create, which must answer first again, marked as a replay.
func (k rpcKeyedCreate) mustReplay(t *testing.T, c usersv1connect.UsersClient, owner int32, requestID, content string, first proto.Message) {
	t.Helper()
	msg, replayed, err := k.send(t.Context(), c, owner, requestID, content)
	apitest.RPCMust(t, k.name+" repeated", err)
	if !proto.Equal(msg, first) {
		t.Fatalf("a repeat of %s answered %v, want the first answer %v", k.name, msg, first)
	}
	if replayed != "true" {
		t.Fatalf("a repeat of %s answered Idempotent-Replayed %q, want \"true\"", k.name, replayed)
	}
}

// rpcWantCount fails the test unless k.count is want.
func rpcWantCount(t *testing.T, k rpcKeyedCreate, c usersv1connect.UsersClient, owner, want int32) {
	t.Helper()
	if got := k.count(t, c, owner); got != want {
		t.Fatalf("%d exist after the %s calls, want %d", got, k.name, want)
	}
}

// rpcIDOf returns the id of the user or post that a create answered.
func rpcIDOf(msg proto.Message) int32 {
	switch m := msg.(type) {
	case *usersv1.CreateUserResponse:
		return m.GetUser().GetId()
	case *usersv1.CreateUserPostResponse:
		return m.GetPost().GetId()
	}
	return 0
}

func TestRPCRequestIDRunsACreateOnce(t *testing.T) {
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			s := startServer(t)
			c := s.RPCClient(p, apitest.Key)
			for _, k := range rpcKeyedCreates {
				// A caller's keys are one namespace for both creates, so each create's keys here are its own.
				rid := func(id string) string { return k.name + ":" + id }
				t.Run(k.name, func(t *testing.T) {
					t.Run("a repeat answers the first answer again, marked replayed, and creates nothing", func(t *testing.T) {
						owner := apitest.RPCCreate(t, c, "Owner", "").GetId()
						before := k.count(t, c, owner)
						first := k.mustCreate(t, c, owner, rid("once"), "First")
						rpcWantCount(t, k, c, owner, before+1)
						for range 2 {
							k.mustReplay(t, c, owner, rid("once"), "First", first)
						}
						rpcWantCount(t, k, c, owner, before+1)
					})

					t.Run("the same request_id with other content is failed_precondition and creates nothing", func(t *testing.T) {
						owner := apitest.RPCCreate(t, c, "Owner", "").GetId()
						first := k.mustCreate(t, c, owner, rid("mine"), "First")
						before := k.count(t, c, owner)
						_, replayed, err := k.send(t.Context(), c, owner, rid("mine"), "Second")
						apitest.RPCWantCode(t, err, connect.CodeFailedPrecondition)
						if replayed != "" {
							t.Errorf("the refusal answered Idempotent-Replayed %q", replayed)
						}
						rpcWantCount(t, k, c, owner, before)
						// The refusal did not disturb what was kept.
						k.mustReplay(t, c, owner, rid("mine"), "First", first)
					})

					t.Run("another request_id with the same content creates another", func(t *testing.T) {
						owner := apitest.RPCCreate(t, c, "Owner", "").GetId()
						before := k.count(t, c, owner)
						a := k.mustCreate(t, c, owner, rid("twin-a"), "Twin")
						b := k.mustCreate(t, c, owner, rid("twin-b"), "Twin")
						if rpcIDOf(a) == rpcIDOf(b) {
							t.Fatalf("two request_ids both answered id %d", rpcIDOf(a))
						}
						rpcWantCount(t, k, c, owner, before+2)
					})

					t.Run("without a request_id every call creates", func(t *testing.T) {
						owner := apitest.RPCCreate(t, c, "Owner", "").GetId()
						before := k.count(t, c, owner)
						k.mustCreate(t, c, owner, "", "Plain")
						k.mustCreate(t, c, owner, "", "Plain")
						rpcWantCount(t, k, c, owner, before+2)
					})

					t.Run("a request_id of 255 printable characters works", func(t *testing.T) {
						owner := apitest.RPCCreate(t, c, "Owner", "").GetId()
						before := k.count(t, c, owner)
						long := rid(strings.Repeat("k", 254-len(rid(""))) + "~")
						if len(long) != 255 {
							t.Fatalf("the request_id is %d characters long", len(long))
						}
						first := k.mustCreate(t, c, owner, long, "Long")
						k.mustReplay(t, c, owner, long, "Long", first)
						rpcWantCount(t, k, c, owner, before+1)
					})

					bad := []struct{ name, requestID string }{
						{"256 characters", rid(strings.Repeat("k", 256-len(rid(""))))},
						{"a tab", "req\tid"},
						{"a NUL", "req\x00id"},
						{"a DEL", "req\x7fid"},
						{"a non-ASCII letter", "réq"},
					}
					for _, b := range bad {
						t.Run("a request_id with "+b.name+" is invalid_argument and creates nothing", func(t *testing.T) {
							owner := apitest.RPCCreate(t, c, "Owner", "").GetId()
							before := k.count(t, c, owner)
							_, _, err := k.send(t.Context(), c, owner, b.requestID, "Bad")
							apitest.RPCWantCode(t, err, connect.CodeInvalidArgument)
							rpcWantCount(t, k, c, owner, before)
						})
					}
				})
			}

			t.Run("a request_id of CreateUser used for CreateUserPost is failed_precondition and creates nothing", func(t *testing.T) {
				owner := apitest.RPCCreate(t, c, "Owner", "").GetId()
				rpcKeyedCreates[0].mustCreate(t, c, owner, "either", "Either")
				_, _, err := rpcKeyedCreates[1].send(t.Context(), c, owner, "either", "Either")
				apitest.RPCWantCode(t, err, connect.CodeFailedPrecondition)
				rpcWantCount(t, rpcKeyedCreates[1], c, owner, 0)
			})

			t.Run("a repeat of CreateUser answers the first answer even after the user changed", func(t *testing.T) {
				k := rpcKeyedCreates[0]
				first := k.mustCreate(t, c, 0, "kept", "Kept").(*usersv1.CreateUserResponse)
				_, err := c.UpdateUser(t.Context(), &usersv1.UpdateUserRequest{Id: first.GetUser().GetId(), User: &usersv1.User{Role: "changed"}})
				apitest.RPCMust(t, "UpdateUser", err)
				k.mustReplay(t, c, 0, "kept", "Kept", first)
			})
		})
	}
}

func TestRPCRequestIDBelongsToTheAPIKey(t *testing.T) {
	// config.go: USERS_API_KEYS is comma-separated.
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			s := startServerWith(t, Config{Keys: testKeys("key-one", "key-two")})
			one, two := s.RPCClient(p, "key-one"), s.RPCClient(p, "key-two")
			for _, k := range rpcKeyedCreates {
				t.Run(k.name, func(t *testing.T) {
					shared, oneOnly := k.name+":shared", k.name+":one-only"
					owner := apitest.RPCCreate(t, one, "Owner", "").GetId()
					before := k.count(t, one, owner)
					fromOne := k.mustCreate(t, one, owner, shared, "Same")
					// Another caller's key is another request, even with the same content: it neither
					// replays nor is refused, and it creates its own.
					fromTwo := k.mustCreate(t, two, owner, shared, "Same")
					if rpcIDOf(fromOne) == rpcIDOf(fromTwo) {
						t.Fatalf("both callers were answered id %d", rpcIDOf(fromOne))
					}
					rpcWantCount(t, k, one, owner, before+2)
					// Each caller's repeat answers its own first answer.
					k.mustReplay(t, one, owner, shared, "Same", fromOne)
					k.mustReplay(t, two, owner, shared, "Same", fromTwo)
					// The second caller's key is kept for it: other content is now refused.
					_, _, err := k.send(t.Context(), two, owner, shared, "Other")
					apitest.RPCWantCode(t, err, connect.CodeFailedPrecondition)
					// Nor is one caller's content compared with another's: the second caller may use a
					// key of the first for something else.
					fromOneAgain := k.mustCreate(t, one, owner, oneOnly, "Other")
					_, _, err = k.send(t.Context(), two, owner, oneOnly, "Different")
					apitest.RPCMust(t, "the second caller's first use of a key the first caller used", err)
					k.mustReplay(t, one, owner, oneOnly, "Other", fromOneAgain)
					rpcWantCount(t, k, one, owner, before+4)
				})
			}
		})
	}
}

// rpcCreateResult is what a create sent in a goroutine answered.
type rpcCreateResult struct {
	msg      proto.Message
	replayed string
	err      error
}

// rpcSendAsync starts the create in a goroutine and returns where its result will arrive.
func rpcSendAsync(ctx context.Context, k rpcKeyedCreate, c usersv1connect.UsersClient, owner int32, requestID, content string) <-chan rpcCreateResult {
	done := make(chan rpcCreateResult, 1)
	go func() {
		msg, replayed, err := k.send(ctx, c, owner, requestID, content)
		done <- rpcCreateResult{msg, replayed, err}
	}()
	return done
}

// rpcHeldOwner creates a user on a held server, letting its create through the gate.
func rpcHeldOwner(t *testing.T, c usersv1connect.UsersClient, held *heldStore) int32 {
	t.Helper()
	held.release <- struct{}{}
	owner := apitest.RPCCreate(t, c, "Owner", "").GetId()
	<-held.arrived
	return owner
}

// rpcHeldTimeout bounds every wait on the held server, so that a call that wrongly reaches the gate
// fails the test instead of hanging it.
const rpcHeldTimeout = 10 * time.Second

func TestRPCRequestIDWhileTheFirstIsStillRunning(t *testing.T) {
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			for _, k := range rpcKeyedCreates {
				t.Run(k.name, func(t *testing.T) {
					// A server of its own: a failure here must not leave a call at the gate of the next case.
					s, held := startHeldServer(t)
					c := s.RPCClient(p, apitest.Key)
					owner := rpcHeldOwner(t, c, held)
					running := k.name + ":running"
					before := k.count(t, c, owner)
					ctx, cancel := context.WithTimeout(t.Context(), rpcHeldTimeout)
					defer cancel()

					firstDone := rpcSendAsync(ctx, k, c, owner, running, "First")
					select {
					case <-held.arrived:
					case r := <-firstDone:
						t.Fatalf("the first call ended before it reached the store: %v", r.err)
					case <-ctx.Done():
						t.Fatal("the first call did not reach the store")
					}

					// Refused before the store: had either reached the gate, it would wait there
					// until ctx ends and answer deadline_exceeded.
					_, replayed, err := k.send(ctx, c, owner, running, "First")
					apitest.RPCWantCode(t, err, connect.CodeAborted)
					if replayed != "" {
						t.Errorf("the refusal answered Idempotent-Replayed %q", replayed)
					}
					_, _, err = k.send(ctx, c, owner, running, "Other")
					apitest.RPCWantCode(t, err, connect.CodeFailedPrecondition)
					if n := len(held.arrived); n != 0 {
						t.Fatalf("%d refused calls reached the store", n)
					}

					held.release <- struct{}{}
					var first rpcCreateResult
					select {
					case first = <-firstDone:
					case <-ctx.Done():
						t.Fatal("the first call did not end once released")
					}
					apitest.RPCMust(t, "the first call", first.err)
					if first.replayed != "" {
						t.Fatalf("the first call answered Idempotent-Replayed %q", first.replayed)
					}
					msg, replayed, err := k.send(ctx, c, owner, running, "First")
					apitest.RPCMust(t, "the repeat after the first ended", err)
					if !proto.Equal(msg, first.msg) || replayed != "true" {
						t.Fatalf("the repeat after the first ended answered %v (Idempotent-Replayed %q), want %v replayed", msg, replayed, first.msg)
					}
					rpcWantCount(t, k, c, owner, before+1)
				})
			}
		})
	}
}

func TestRPCRequestIDOfAFailedCreateIsNotKept(t *testing.T) {
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			t.Run("CreateUserPost to a missing user keeps nothing, so the request_id works for a user that exists", func(t *testing.T) {
				s := startServer(t)
				c := s.RPCClient(p, apitest.Key)
				k := rpcKeyedCreates[1]
				missing := rpcMissingUserID(t, c)
				for range 2 { // had the failure been kept, the repeat would be replayed or aborted
					_, replayed, err := k.send(t.Context(), c, missing, "retry", "Post")
					apitest.RPCWantCode(t, err, connect.CodeNotFound)
					if replayed != "" {
						t.Fatalf("a failed create answered Idempotent-Replayed %q", replayed)
					}
				}
				owner := apitest.RPCCreate(t, c, "Owner", "").GetId()
				first := k.mustCreate(t, c, owner, "retry", "Post")
				k.mustReplay(t, c, owner, "retry", "Post", first)
				rpcWantCount(t, k, c, owner, 1)
			})

			// The server sees its request's context end and gives the key back although that same
			// context is gone; until it has, a retry is told that the first is still running.
			for _, k := range rpcKeyedCreates {
				t.Run(k.name+" cancelled by its client keeps nothing, so a retry runs", func(t *testing.T) {
					s, held := startHeldServer(t)
					c := s.RPCClient(p, apitest.Key)
					owner := rpcHeldOwner(t, c, held)
					before := k.count(t, c, owner)

					ctx, cancel := context.WithCancel(t.Context())
					firstDone := rpcSendAsync(ctx, k, c, owner, "cancelled", "Gone")
					select {
					case <-held.arrived:
					case <-time.After(rpcHeldTimeout):
						t.Fatal("the first call did not reach the store")
					}
					cancel()
					if r := <-firstDone; r.err == nil {
						t.Fatalf("the cancelled call answered %v", r.msg)
					}

					retryCtx, stop := context.WithTimeout(t.Context(), rpcHeldTimeout)
					defer stop()
					for {
						retry := rpcSendAsync(retryCtx, k, c, owner, "cancelled", "Gone")
						select {
						case r := <-retry: // answered without reaching the store
							if connect.CodeOf(r.err) == connect.CodeAborted && retryCtx.Err() == nil {
								time.Sleep(20 * time.Millisecond)
								continue
							}
							t.Fatalf("a retry after the cancelled call answered %v (%v, Idempotent-Replayed %q), want it to run",
								r.msg, r.err, r.replayed)
						case <-held.arrived:
							held.release <- struct{}{}
							r := <-retry
							apitest.RPCMust(t, "the retry", r.err)
							if r.replayed != "" {
								t.Fatalf("the retry answered Idempotent-Replayed %q", r.replayed)
							}
						}
						break
					}
					rpcWantCount(t, k, c, owner, before+1)
				})
			}
		})
	}
}

func TestRPCRequestIDIsSharedWithRESTAndEveryProtocol(t *testing.T) {
	s := startServer(t)
	users := rpcKeyedCreates[0]
	posts := rpcKeyedCreates[1]
	seeder := s.RPCClient(apitest.RPCProtocolNamed(t, "Connect binary"), apitest.Key)

	// restCreate POSTs body to path with the Idempotency-Key key and returns the answer.
	restCreate := func(t *testing.T, path, key, body string) response {
		t.Helper()
		return s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: path, Key: true, Body: body,
			Header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": key}})
	}

	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			c := s.RPCClient(p, apitest.Key)

			t.Run("a CreateUser after a REST POST /users with the same key and content replays it", func(t *testing.T) {
				key := "rest-first " + p.Name
				before := users.count(t, c, 0)
				res := restCreate(t, "/users", key, `{"name":"Rhea","role":"keyed"}`)
				if res.Status != http.StatusCreated || res.Header.Get(rpcReplayedHeader) != "" {
					t.Fatalf("REST create: %d %v %s", res.Status, res.Header, res.Body)
				}
				fromREST := &usersv1.User{}
				if err := protojson.Unmarshal(res.Body, fromREST); err != nil {
					t.Fatalf("the REST body %s is not a User: %v", res.Body, err)
				}
				users.mustReplay(t, c, 0, key, "Rhea", &usersv1.CreateUserResponse{User: fromREST})
				_, _, err := users.send(t.Context(), c, 0, key, "Other")
				apitest.RPCWantCode(t, err, connect.CodeFailedPrecondition)
				rpcWantCount(t, users, c, 0, before+1)
			})

			t.Run("a REST POST /users after a CreateUser with the same key and content replays it", func(t *testing.T) {
				key := "rpc-first " + p.Name
				before := users.count(t, c, 0)
				first := users.mustCreate(t, c, 0, key, "Remy").(*usersv1.CreateUserResponse)
				// The same JSON value, not the same bytes: other member order and spacing.
				res := restCreate(t, "/users", key, `{ "role" : "keyed", "name" : "Remy" }`)
				if res.Status != http.StatusCreated || res.Header.Get(rpcReplayedHeader) != "true" {
					t.Fatalf("REST repeat: %d with Idempotent-Replayed %q, want 201 and true: %s",
						res.Status, res.Header.Get(rpcReplayedHeader), res.Body)
				}
				fromREST := &usersv1.User{}
				if err := protojson.Unmarshal(res.Body, fromREST); err != nil || !proto.Equal(fromREST, first.GetUser()) {
					t.Fatalf("the REST repeat answered %s, want %v (%v)", res.Body, first.GetUser(), err)
				}
				rpcWantCount(t, users, c, 0, before+1)
			})

			t.Run("a CreateUserPost after a REST POST /users/:id/posts with the same key and content replays it", func(t *testing.T) {
				key := "rest-post " + p.Name
				owner := apitest.RPCCreate(t, seeder, "Owner", "").GetId()
				res := restCreate(t, fmt.Sprintf("/users/%d/posts", owner), key, `{"body":"body","title":"Note"}`)
				if res.Status != http.StatusCreated {
					t.Fatalf("REST create post: %d %s", res.Status, res.Body)
				}
				fromREST := &usersv1.Post{}
				if err := protojson.Unmarshal(res.Body, fromREST); err != nil {
					t.Fatalf("the REST body %s is not a Post: %v", res.Body, err)
				}
				posts.mustReplay(t, c, owner, key, "Note", &usersv1.CreateUserPostResponse{Post: fromREST})
				rpcWantCount(t, posts, c, owner, 1)
			})
		})
	}

	t.Run("one request_id used over every protocol in turn creates once", func(t *testing.T) {
		for _, k := range rpcKeyedCreates {
			owner := apitest.RPCCreate(t, seeder, "Owner", "").GetId()
			before := k.count(t, seeder, owner)
			var first proto.Message
			for i, p := range apitest.RPCProtocols {
				c := s.RPCClient(p, apitest.Key)
				if i == 0 {
					first = k.mustCreate(t, c, owner, k.name+":every protocol", "Shared")
					continue
				}
				k.mustReplay(t, c, owner, k.name+":every protocol", "Shared", first)
			}
			rpcWantCount(t, k, seeder, owner, before+1)
		}
	})
}
