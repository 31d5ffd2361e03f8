// Batches of users (AIP-231, 233, 235): each reads or writes up to MaxBatchSize users, all or
// nothing, and an error names the item of the batch that caused it.
package users

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"
)

// MaxBatchSize is the most items one batch may carry: enough to move a provisioning system's users
// in few calls, and few enough that one batch is a short transaction and its request fits the body
// limit.
const MaxBatchSize = 1000

// checkBatchSize refuses a batch with no items or with more than MaxBatchSize.
func checkBatchSize(field string, n int) error {
	switch {
	case n == 0:
		return InvalidField(field, "%s is empty: a batch needs at least one item", field)
	case n > MaxBatchSize:
		return InvalidField(field, "%s holds %d items; at most %d are allowed in one batch", field, n, MaxBatchSize)
	}
	return nil
}

// checkBatchIDs checks the ids of a batch, each a positive id; with unique, each at most once.
func checkBatchIDs(field string, ids []int32, unique bool) error {
	if err := checkBatchSize(field, len(ids)); err != nil {
		return err
	}
	seen := map[int32]int{}
	for i, id := range ids {
		item := fmt.Sprintf("%s[%d]", field, i)
		if err := checkID(item, id); err != nil {
			return err
		}
		if first, ok := seen[id]; ok && unique {
			return InvalidField(item, "%s repeats %s[%d], user %d: name each user once", item, field, first, id)
		}
		seen[id] = i
	}
	return nil
}

// inItem makes the error of a field of one item of a batch name the item: its field becomes
// item.field, and its message says which item it is about. An error about no field is left alone.
func inItem(err error, item string) error {
	var e *Error
	if !errors.As(err, &e) || e.field == "" {
		return err
	}
	return e.about(item)
}

// about is e as the error of one item of a batch: its field, if it names one, under item, and its
// message saying which item it is.
func (e *Error) about(item string) *Error {
	c := *e
	if c.field != "" {
		c.field = item + "." + c.field
	}
	c.message = item + ": " + c.message
	return &c
}

// fromBatch is fromStore for the error of a batch: when an item of the batch failed it in the store
// (store.ItemError), the client error of that item, about item(index).
func fromBatch(err error, item func(index int) string) error {
	var e *Error
	if !errors.As(err, &e) {
		err = fromStore(err)
	}
	var failed store.ItemError
	if !errors.As(err, &failed) || !errors.As(err, &e) {
		return err
	}
	return e.about(item(failed.Index))
}

// BatchGetUsers returns the users with the ids asked for, in their order; an id asked twice is
// answered twice, as AIP-231 allows.
func (s *Service) BatchGetUsers(ctx context.Context, req *usersv1.BatchGetUsersRequest) (*usersv1.BatchGetUsersResponse, error) {
	if err := checkBatchIDs("ids", req.GetIds(), false); err != nil {
		return nil, err
	}
	ctx, err := forRead(ctx)
	if err != nil {
		return nil, err
	}
	found, err := s.store.BatchGetUsers(ctx, req.GetIds())
	if err != nil {
		return nil, fromStore(err) // names the first missing id, which says which item it is
	}
	return &usersv1.BatchGetUsersResponse{Users: mapSlice(found, userToProto)}, nil
}

// BatchCreateUsers creates the users of every request in one transaction, once per the batch's
// request_id, as CreateUser does one.
func (s *Service) BatchCreateUsers(ctx context.Context, req *usersv1.BatchCreateUsersRequest) (*usersv1.BatchCreateUsersResponse, error) {
	requests := req.GetRequests()
	if err := checkBatchSize("requests", len(requests)); err != nil {
		return nil, err
	}
	batch := make([]store.NewUser, len(requests))
	hashed := []string{strconv.Itoa(len(requests))}
	for i, r := range requests {
		item := fmt.Sprintf("requests[%d]", i)
		if r.GetUser() == nil {
			return nil, InvalidField(item+".user", "%s.user is required", item)
		}
		if err := checkUserFields(r.GetUser()); err != nil {
			return nil, inItem(err, item+".user")
		}
		if r.GetRequestId() != "" {
			return nil, InvalidField(item+".request_id",
				"%s.request_id must be empty: a batch is one request, whose key is the batch's request_id", item)
		}
		nu := store.NewUser{Name: r.GetUser().GetName(), Role: r.GetUser().GetRole(), Identity: identityOf(r.GetUser())}
		batch[i] = nu
		// Each user's fields are preceded by their number, so that where one user ends and the
		// next begins is part of what is hashed.
		fields := append([]string{nu.Name, nu.Role}, identityHash(nu.Identity)...)
		hashed = append(append(hashed, strconv.Itoa(len(fields))), fields...)
	}
	if err := CheckRequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	ctx, err := forWrite(ctx)
	if err != nil {
		return nil, err
	}
	res, err := createOnce(ctx, s, req.GetRequestId(), requestHash("BatchCreateUsers", hashed...),
		func(created []store.User) *usersv1.BatchCreateUsersResponse {
			return &usersv1.BatchCreateUsersResponse{Users: mapSlice(created, userToProto)}
		},
		func(done *store.Completion[[]store.User]) ([]store.User, error) {
			return s.store.CreateUsers(ctx, batch, done)
		})
	if err != nil {
		return nil, fromBatch(err, func(i int) string { return fmt.Sprintf("requests[%d].user", i) })
	}
	return res, nil
}

// BatchDeleteUsers deletes the users in one transaction, each as DeleteUser does without purge: kept
// for the retention and answered as deleted, or removed at once when there is none.
func (s *Service) BatchDeleteUsers(ctx context.Context, req *usersv1.BatchDeleteUsersRequest) (*usersv1.BatchDeleteUsersResponse, error) {
	ids := req.GetIds()
	if err := checkBatchIDs("ids", ids, true); err != nil {
		return nil, err
	}
	ctx, err := forWrite(ctx)
	if err != nil {
		return nil, err
	}
	res := &usersv1.BatchDeleteUsersResponse{}
	if s.deletedRetention == 0 {
		err = s.store.DeleteUsers(ctx, ids)
	} else {
		var deleted []store.User
		deleted, err = s.store.SoftDeleteUsers(ctx, ids, time.Now().Add(s.deletedRetention))
		res.Users = mapSlice(deleted, userToProto)
	}
	if err != nil {
		return nil, fromBatch(err, func(i int) string { return fmt.Sprintf("ids[%d]", i) })
	}
	s.answerToken(ctx)
	return res, nil
}
