// Package users holds the rules of the users service: the one implementation of users.v1.Users
// behind REST and every RPC protocol. Validation, page tokens, update masks, etags, idempotency
// keys, the conversions to the wire messages, the error vocabulary, and the watches of users with
// the feed that serves them all live here, once. It knows nothing of HTTP: a face (package
// handlers) turns requests into the proto messages, puts the caller in the context (WithCaller)
// and the request's call beside it (WithCall), hands a watch a stream (WatchStream), and turns an
// Error's code into a status.
package users

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"

	"connectrpc.com/connect"
)

const (
	// DefaultWatchHeartbeat is how long a watch stays silent at most when Options.WatchHeartbeat
	// is 0: under the idle timeouts of common proxies and load balancers (30 to 60 seconds).
	DefaultWatchHeartbeat = 15 * time.Second
	// DefaultMaxWatchers is the limit of open watches when Options.MaxWatchers is 0.
	DefaultMaxWatchers = 10_000
	// DefaultDeletedRetention is how long a deleted user stays restorable unless the operator
	// says otherwise: thirty days, time enough to notice a mistaken delete or a provisioning
	// system's wrong sync.
	DefaultDeletedRetention = 720 * time.Hour
)

// Options is what a Service depends on.
type Options struct {
	Store  store.Store
	Logger *slog.Logger
	// Metrics counts idempotent replays, refused idempotency keys and watches; nil counts nothing.
	Metrics Metrics
	// MaxWatchers limits the watches of users open at once; 0 means DefaultMaxWatchers.
	MaxWatchers int
	// WatchHeartbeat is the longest a watch stays silent; 0 means DefaultWatchHeartbeat.
	WatchHeartbeat time.Duration
	// DeletedRetention is how long a deleted user is kept, restorable, before it is purged; 0
	// removes a deleted user at once (DeleteUser then cannot be undone).
	DeletedRetention time.Duration
}

// Service implements the users.v1.Users service on a store: one method per operation, with the
// generated handler's signatures but for the watch, whose stream is the face's (see Watch).
type Service struct {
	store   store.Store
	logger  *slog.Logger
	metrics Metrics
	// feed hands the changes of users to the watches (see Watch); heartbeat is a watch's longest silence.
	feed      *feed
	heartbeat time.Duration
	// deletedRetention is Options.DeletedRetention.
	deletedRetention time.Duration
	// catchUpTurns holds a token for each read of the log that a watch catching up from far back
	// is making (see watch.readMore).
	catchUpTurns chan struct{}
}

// New returns the service on opts.Store. EndWatches must be called when it is no longer used.
func New(opts Options) (*Service, error) {
	if opts.Store == nil || opts.Logger == nil {
		return nil, errors.New("users.New needs a store and a logger")
	}
	if opts.Metrics == nil {
		opts.Metrics = noMetrics{}
	}
	if opts.MaxWatchers == 0 {
		opts.MaxWatchers = DefaultMaxWatchers
	}
	if opts.WatchHeartbeat == 0 {
		opts.WatchHeartbeat = DefaultWatchHeartbeat
	}
	return &Service{
		store: opts.Store, logger: opts.Logger, metrics: opts.Metrics,
		feed:             newFeed(opts.Store, opts.Logger, opts.Metrics, opts.MaxWatchers),
		heartbeat:        opts.WatchHeartbeat,
		deletedRetention: opts.DeletedRetention,
		catchUpTurns:     make(chan struct{}, catchUpReads),
	}, nil
}

// WatchHeartbeat is the longest a watch stays silent: a stream's deadlines must allow for it.
func (s *Service) WatchHeartbeat() time.Duration { return s.heartbeat }

// EndWatches ends every watch of users with UNAVAILABLE, so that clients resume on another
// replica, and refuses new ones: a watch never ends by itself, so a server that waits for its
// requests to finish must end them first.
func (s *Service) EndWatches() { s.feed.close(errServerStopping) }

// GetUser returns one user.
func (s *Service) GetUser(ctx context.Context, req *usersv1.GetUserRequest) (*usersv1.User, error) {
	if err := checkID("id", req.GetId()); err != nil {
		return nil, err
	}
	ctx, err := forRead(ctx)
	if err != nil {
		return nil, err
	}
	get := s.store.GetUser
	if call := callOf(ctx); call != nil && call.ShowDeleted {
		if err := mayShowDeleted(ctx); err != nil {
			return nil, err
		}
		get = s.store.GetUserShowingDeleted
	}
	user, err := get(ctx, req.GetId())
	if err != nil {
		return nil, fromStore(err)
	}
	return userToProto(user), nil
}

// ListUsers returns one page of users, the number of matches, and the token of the next page.
func (s *Service) ListUsers(ctx context.Context, req *usersv1.ListUsersRequest) (*usersv1.ListUsersResponse, error) {
	sort, err := parseSort(req.GetSort())
	if err != nil {
		return nil, err
	}
	if err := checkLine("namePrefix", req.GetNamePrefix(), maxNameLength); err != nil {
		return nil, err
	}
	// A role that no user can have is refused rather than searched for: PostgreSQL cannot even
	// compare text with a NUL or that is not UTF-8 (SQLite found nothing), and an answer must not
	// depend on the backend.
	if err := checkStoredLine("role", req.GetRole(), maxRoleLength); err != nil {
		return nil, err
	}
	offset, limit, err := pageBounds(req.GetPage(), req.GetLimit(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	filter, err := parseFilter(req.GetFilter())
	if err != nil {
		return nil, err
	}
	if req.GetShowDeleted() {
		if err := mayShowDeleted(ctx); err != nil {
			return nil, err
		}
	}
	q := store.UserQuery{Role: req.GetRole(), NamePrefix: req.GetNamePrefix(), Filter: filter, Sort: sort, Offset: offset, Limit: limit, ShowDeleted: req.GetShowDeleted()}
	binding := usersBinding(q.Role, q.NamePrefix, req.GetFilter(), q.ShowDeleted, sort, limit)
	if req.GetPageToken() != "" {
		if q.After, err = userCursor(req.GetPageToken(), binding, sort); err != nil {
			return nil, err
		}
	}
	if ctx, err = forRead(ctx); err != nil {
		return nil, err
	}
	page, err := s.store.ListUsers(ctx, q)
	if err != nil {
		return nil, fromStore(err)
	}
	res := &usersv1.ListUsersResponse{Users: mapSlice(page.Items, userToProto), TotalCount: clampInt32(page.Total)}
	if page.More {
		res.NextPageToken = userPageToken(binding, sort, page.Items[len(page.Items)-1])
	}
	return res, nil
}

// CreateUser creates a user from the writable fields of req.user, once per request_id: a repeat
// gets the first answer again, and the call says Replayed.
func (s *Service) CreateUser(ctx context.Context, req *usersv1.CreateUserRequest) (*usersv1.CreateUserResponse, error) {
	if req.GetUser() == nil {
		return nil, InvalidField("user", "user is required")
	}
	if err := checkUserFields(req.GetUser()); err != nil {
		return nil, err
	}
	if err := CheckRequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	ctx, err := forWrite(ctx)
	if err != nil {
		return nil, err
	}
	nu := store.NewUser{Name: req.GetUser().GetName(), Role: req.GetUser().GetRole(), Identity: identityOf(req.GetUser())}
	return createOnce(ctx, s, req.GetRequestId(), requestHash("CreateUser", append([]string{nu.Name, nu.Role}, identityHash(nu.Identity)...)...),
		func(created store.User) *usersv1.CreateUserResponse {
			return &usersv1.CreateUserResponse{User: userToProto(created)}
		},
		func(done *store.Completion[store.User]) (store.User, error) { return s.store.CreateUser(ctx, nu, done) })
}

// ReplaceUser sets every writable field; a field left empty is cleared (active: set true).
func (s *Service) ReplaceUser(ctx context.Context, req *usersv1.ReplaceUserRequest) (*usersv1.ReplaceUserResponse, error) {
	if err := checkID("id", req.GetId()); err != nil {
		return nil, err
	}
	if req.GetUser() == nil {
		return nil, InvalidField("user", "user is required")
	}
	if err := checkBodyID("user.id", req.GetUser().GetId(), req.GetId()); err != nil {
		return nil, err
	}
	if err := checkUserFields(req.GetUser()); err != nil {
		return nil, err
	}
	ctx, ifVersion, err := conditionalWrite(ctx, req.GetEtag())
	if err != nil {
		return nil, err
	}
	name, role := req.GetUser().GetName(), req.GetUser().GetRole()
	changes := store.UserChanges{Name: &name, Role: &role}
	identityChanges(&changes, identityOf(req.GetUser()))
	user, err := s.store.UpdateUser(ctx, req.GetId(), changes, ifVersion)
	if err != nil {
		return nil, fromStore(err)
	}
	s.answerToken(ctx)
	return &usersv1.ReplaceUserResponse{User: userToProto(user)}, nil
}

// UpdateUser sets the fields that the update mask names (AIP-134).
func (s *Service) UpdateUser(ctx context.Context, req *usersv1.UpdateUserRequest) (*usersv1.UpdateUserResponse, error) {
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
	ctx, ifVersion, err := conditionalWrite(ctx, req.GetEtag())
	if err != nil {
		return nil, err
	}
	var user store.User
	if changes.IsEmpty() {
		// Nothing to change: no write and no new etag, but the precondition still holds or fails.
		user, err = s.store.GetUser(ctx, req.GetId())
		if err == nil && !ifVersion.Allows(user.Version) {
			err = fmt.Errorf("user %d: %w", user.ID, store.ErrVersionMismatch)
		}
	} else {
		user, err = s.store.UpdateUser(ctx, req.GetId(), changes, ifVersion)
	}
	if err != nil {
		return nil, fromStore(err)
	}
	s.answerToken(ctx)
	return &usersv1.UpdateUserResponse{User: userToProto(user)}, nil
}

// DeleteUser deletes a user and the user's posts (AIP-164): it keeps the user, hidden and
// restorable, for the retention, and answers it as deleted; with purge, or no retention, it
// removes the user at once and answers nothing.
func (s *Service) DeleteUser(ctx context.Context, req *usersv1.DeleteUserRequest) (*usersv1.DeleteUserResponse, error) {
	if err := checkID("id", req.GetId()); err != nil {
		return nil, err
	}
	ctx, ifVersion, err := conditionalWrite(ctx, req.GetEtag())
	if err != nil {
		return nil, err
	}
	res := &usersv1.DeleteUserResponse{}
	switch {
	case req.GetPurge():
		err = s.store.PurgeUser(ctx, req.GetId(), ifVersion)
	case s.deletedRetention == 0:
		err = s.store.DeleteUser(ctx, req.GetId(), ifVersion)
	default:
		var user store.User
		user, err = s.store.SoftDeleteUser(ctx, req.GetId(), ifVersion, time.Now().Add(s.deletedRetention))
		res.User = userToProto(user)
	}
	if err != nil {
		return nil, fromStore(err)
	}
	s.answerToken(ctx)
	return res, nil
}

// mayShowDeleted refuses to show deleted users to a caller without a credential. Users are often
// deleted so that they are no longer seen: where reads are public, an anonymous reader sees the
// live users only, and a deleted user only a caller that says who it is.
func mayShowDeleted(ctx context.Context) error {
	if _, ok := CallerOf(ctx); !ok {
		return NewError(connect.CodeUnauthenticated, ReasonNone, "showing deleted users needs a credential: send an API key or a bearer token")
	}
	return nil
}

// UndeleteUser restores a deleted user that is not yet purged, and answers it.
func (s *Service) UndeleteUser(ctx context.Context, req *usersv1.UndeleteUserRequest) (*usersv1.User, error) {
	if err := checkID("id", req.GetId()); err != nil {
		return nil, err
	}
	ctx, ifVersion, err := conditionalWrite(ctx, req.GetEtag())
	if err != nil {
		return nil, err
	}
	user, err := s.store.UndeleteUser(ctx, req.GetId(), ifVersion)
	if err != nil {
		return nil, fromStore(err)
	}
	s.answerToken(ctx)
	return userToProto(user), nil
}

// ListUserPosts returns one page of a user's posts, by id ascending, and the token of the next page.
func (s *Service) ListUserPosts(ctx context.Context, req *usersv1.ListUserPostsRequest) (*usersv1.ListUserPostsResponse, error) {
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
	if ctx, err = forRead(ctx); err != nil {
		return nil, err
	}
	page, err := s.store.ListPosts(ctx, req.GetUserId(), q)
	if err != nil {
		return nil, fromStore(err)
	}
	res := &usersv1.ListUserPostsResponse{Posts: mapSlice(page.Items, postToProto), TotalCount: clampInt32(page.Total)}
	if page.More {
		res.NextPageToken = encodePageToken(pageToken{Query: binding, ID: page.Items[len(page.Items)-1].ID})
	}
	return res, nil
}

// CreateUserPost adds a post to an existing user, once per request_id (see CreateUser).
func (s *Service) CreateUserPost(ctx context.Context, req *usersv1.CreateUserPostRequest) (*usersv1.CreateUserPostResponse, error) {
	if err := checkID("user_id", req.GetUserId()); err != nil {
		return nil, err
	}
	p := req.GetPost()
	if p == nil {
		return nil, InvalidField("post", "post is required")
	}
	if err := checkBodyID("post.user_id", p.GetUserId(), req.GetUserId()); err != nil {
		return nil, err
	}
	if err := checkRequiredText("title", p.GetTitle(), maxTitleLength); err != nil {
		return nil, err
	}
	if err := checkText("body", p.GetBody(), maxBodyLength); err != nil {
		return nil, err
	}
	if err := CheckRequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	ctx, err := forWrite(ctx)
	if err != nil {
		return nil, err
	}
	userID, np := req.GetUserId(), store.NewPost{Title: p.GetTitle(), Body: p.GetBody()}
	return createOnce(ctx, s, req.GetRequestId(), requestHash("CreateUserPost", strconv.Itoa(int(userID)), np.Title, np.Body),
		func(created store.Post) *usersv1.CreateUserPostResponse {
			return &usersv1.CreateUserPostResponse{Post: postToProto(created)}
		},
		func(done *store.Completion[store.Post]) (store.Post, error) {
			return s.store.CreatePost(ctx, userID, np, done)
		})
}

// checkUserFields checks the writable fields of a user that is created or replaced.
func checkUserFields(user *usersv1.User) error {
	if err := checkRequiredText("name", user.GetName(), maxNameLength); err != nil {
		return err
	}
	if err := checkLine("role", user.GetRole(), maxRoleLength); err != nil {
		return err
	}
	return checkIdentity(user)
}

// clampInt32 fits a count into the int32 of the wire messages.
func clampInt32(n int64) int32 {
	return int32(min(n, int64(^uint32(0)>>1)))
}
