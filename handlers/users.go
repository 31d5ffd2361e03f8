// The one implementation of the Users service: validation, paging and the store calls. RPCs reach it
// through connect-go; REST routes adapt HTTP requests to the same methods.
package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/store"
)

// Users implements the users.v1.Users service on a store.
type Users struct {
	store   store.Store
	logger  *slog.Logger
	metrics *metrics // counts idempotent replays, refused idempotency keys and watches; nil counts nothing
	// feed hands the changes of users to the watches (watch.go); heartbeat is a watch's longest silence.
	feed      *feed
	heartbeat time.Duration
}

var _ usersv1connect.UsersHandler = (*Users)(nil)

// GetUser returns one user.
func (u *Users) GetUser(ctx context.Context, req *usersv1.GetUserRequest) (*usersv1.User, error) {
	if err := checkID("id", req.GetId()); err != nil {
		return nil, err
	}
	user, err := u.store.GetUser(ctx, req.GetId())
	if err != nil {
		return nil, fromStore(err)
	}
	return userToProto(user), nil
}

// ListUsers returns one page of users, the number of matches, and the token of the next page.
func (u *Users) ListUsers(ctx context.Context, req *usersv1.ListUsersRequest) (*usersv1.ListUsersResponse, error) {
	sort, err := parseSort(req.GetSort())
	if err != nil {
		return nil, err
	}
	if err := checkLine("namePrefix", req.GetNamePrefix(), maxNameLength); err != nil {
		return nil, err
	}
	offset, limit, err := pageBounds(req.GetPage(), req.GetLimit(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	q := store.UserQuery{Role: req.GetRole(), NamePrefix: req.GetNamePrefix(), Sort: sort, Offset: offset, Limit: limit}
	binding := usersBinding(q.Role, q.NamePrefix, sort, limit)
	if req.GetPageToken() != "" {
		if q.After, err = userCursor(req.GetPageToken(), binding, sort); err != nil {
			return nil, err
		}
	}
	page, err := u.store.ListUsers(ctx, q)
	if err != nil {
		return nil, fromStore(err)
	}
	res := &usersv1.ListUsersResponse{Users: mapSlice(page.Items, userToProto), TotalCount: clampInt32(page.Total)}
	if page.More {
		res.NextPageToken = userPageToken(binding, sort, page.Items[len(page.Items)-1])
	}
	return res, nil
}

// CreateUser creates a user from the writable fields of req.user, once per request_id.
func (u *Users) CreateUser(ctx context.Context, req *usersv1.CreateUserRequest) (*usersv1.CreateUserResponse, error) {
	res, replayed, err := u.createUser(ctx, req)
	markReplayed(ctx, replayed)
	return res, err
}

// createUser is CreateUser that also says whether the answer repeats a kept one.
func (u *Users) createUser(ctx context.Context, req *usersv1.CreateUserRequest) (*usersv1.CreateUserResponse, bool, error) {
	if req.GetUser() == nil {
		return nil, false, invalidArgument("user is required")
	}
	if err := checkUserFields(req.GetUser()); err != nil {
		return nil, false, err
	}
	if err := checkRequestID("request_id", req.GetRequestId()); err != nil {
		return nil, false, err
	}
	nu := store.NewUser{Name: req.GetUser().GetName(), Role: req.GetUser().GetRole()}
	return createOnce(ctx, u, req.GetRequestId(), requestHash("CreateUser", nu.Name, nu.Role),
		func(created store.User) *usersv1.CreateUserResponse {
			return &usersv1.CreateUserResponse{User: userToProto(created)}
		},
		func(done *store.Completion[store.User]) (store.User, error) { return u.store.CreateUser(ctx, nu, done) })
}

// ReplaceUser sets every writable field; a role left empty is cleared.
func (u *Users) ReplaceUser(ctx context.Context, req *usersv1.ReplaceUserRequest) (*usersv1.ReplaceUserResponse, error) {
	if err := checkID("id", req.GetId()); err != nil {
		return nil, err
	}
	if req.GetUser() == nil {
		return nil, invalidArgument("user is required")
	}
	if err := checkBodyID("user.id", req.GetUser().GetId(), req.GetId()); err != nil {
		return nil, err
	}
	if err := checkUserFields(req.GetUser()); err != nil {
		return nil, err
	}
	ifVersion, err := ifMatchVersions(req.GetEtag())
	if err != nil {
		return nil, err
	}
	name, role := req.GetUser().GetName(), req.GetUser().GetRole()
	user, err := u.store.UpdateUser(ctx, req.GetId(), store.UserChanges{Name: &name, Role: &role}, ifVersion)
	if err != nil {
		return nil, fromStore(err)
	}
	return &usersv1.ReplaceUserResponse{User: userToProto(user)}, nil
}

// UpdateUser sets the fields that the update mask names (AIP-134).
func (u *Users) UpdateUser(ctx context.Context, req *usersv1.UpdateUserRequest) (*usersv1.UpdateUserResponse, error) {
	if err := checkID("id", req.GetId()); err != nil {
		return nil, err
	}
	if err := checkBodyID("user.id", req.GetUser().GetId(), req.GetId()); err != nil {
		return nil, err
	}
	changes, err := userChanges(req.GetUser(), req.GetUpdateMask())
	if err != nil {
		return nil, err
	}
	ifVersion, err := ifMatchVersions(req.GetEtag())
	if err != nil {
		return nil, err
	}
	var user store.User
	if changes == (store.UserChanges{}) {
		// Nothing to change: no write and no new etag, but the precondition still holds or fails.
		user, err = u.store.GetUser(ctx, req.GetId())
		if err == nil && !ifVersion.Allows(user.Version) {
			err = fmt.Errorf("user %d: %w", user.ID, store.ErrVersionMismatch)
		}
	} else {
		user, err = u.store.UpdateUser(ctx, req.GetId(), changes, ifVersion)
	}
	if err != nil {
		return nil, fromStore(err)
	}
	return &usersv1.UpdateUserResponse{User: userToProto(user)}, nil
}

// DeleteUser deletes a user and the user's posts.
func (u *Users) DeleteUser(ctx context.Context, req *usersv1.DeleteUserRequest) (*usersv1.DeleteUserResponse, error) {
	if err := checkID("id", req.GetId()); err != nil {
		return nil, err
	}
	ifVersion, err := ifMatchVersions(req.GetEtag())
	if err != nil {
		return nil, err
	}
	if err := u.store.DeleteUser(ctx, req.GetId(), ifVersion); err != nil {
		return nil, fromStore(err)
	}
	return &usersv1.DeleteUserResponse{}, nil
}

// ListUserPosts returns one page of a user's posts, by id ascending, and the token of the next page.
func (u *Users) ListUserPosts(ctx context.Context, req *usersv1.ListUserPostsRequest) (*usersv1.ListUserPostsResponse, error) {
	if err := checkID("user_id", req.GetUserId()); err != nil {
		return nil, err
	}
	offset, limit, err := pageBounds(req.GetPage(), req.GetLimit(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	q := store.PostQuery{Offset: offset, Limit: limit}
	binding := postsBinding(req.GetUserId(), limit)
	if req.GetPageToken() != "" {
		t, err := decodePageToken(req.GetPageToken(), binding)
		if err != nil {
			return nil, err
		}
		q.AfterID = t.ID
	}
	page, err := u.store.ListPosts(ctx, req.GetUserId(), q)
	if err != nil {
		return nil, fromStore(err)
	}
	res := &usersv1.ListUserPostsResponse{Posts: mapSlice(page.Items, postToProto), TotalCount: clampInt32(page.Total)}
	if page.More {
		res.NextPageToken = encodePageToken(pageToken{Query: binding, ID: page.Items[len(page.Items)-1].ID})
	}
	return res, nil
}

// CreateUserPost adds a post to an existing user, once per request_id.
func (u *Users) CreateUserPost(ctx context.Context, req *usersv1.CreateUserPostRequest) (*usersv1.CreateUserPostResponse, error) {
	res, replayed, err := u.createUserPost(ctx, req)
	markReplayed(ctx, replayed)
	return res, err
}

// createUserPost is CreateUserPost that also says whether the answer repeats a kept one.
func (u *Users) createUserPost(ctx context.Context, req *usersv1.CreateUserPostRequest) (*usersv1.CreateUserPostResponse, bool, error) {
	if err := checkID("user_id", req.GetUserId()); err != nil {
		return nil, false, err
	}
	p := req.GetPost()
	if p == nil {
		return nil, false, invalidArgument("post is required")
	}
	if err := checkBodyID("post.user_id", p.GetUserId(), req.GetUserId()); err != nil {
		return nil, false, err
	}
	if err := checkRequiredText("title", p.GetTitle(), maxTitleLength); err != nil {
		return nil, false, err
	}
	if err := checkText("body", p.GetBody(), maxBodyLength); err != nil {
		return nil, false, err
	}
	if err := checkRequestID("request_id", req.GetRequestId()); err != nil {
		return nil, false, err
	}
	userID, np := req.GetUserId(), store.NewPost{Title: p.GetTitle(), Body: p.GetBody()}
	return createOnce(ctx, u, req.GetRequestId(), requestHash("CreateUserPost", strconv.Itoa(int(userID)), np.Title, np.Body),
		func(created store.Post) *usersv1.CreateUserPostResponse {
			return &usersv1.CreateUserPostResponse{Post: postToProto(created)}
		},
		func(done *store.Completion[store.Post]) (store.Post, error) {
			return u.store.CreatePost(ctx, userID, np, done)
		})
}

// checkUserFields checks the writable fields of a user that is created or replaced.
func checkUserFields(user *usersv1.User) error {
	if err := checkRequiredText("name", user.GetName(), maxNameLength); err != nil {
		return err
	}
	return checkLine("role", user.GetRole(), maxRoleLength)
}

// clampInt32 fits a count into the int32 of the wire messages.
func clampInt32(n int64) int32 {
	return int32(min(n, int64(^uint32(0)>>1)))
}
