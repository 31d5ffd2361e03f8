// REST adapters for /users and /users/{id}: each turns an HTTP request into the request message of
// the matching RPC, calls the one Users implementation, and turns its answer into status and headers.
package handlers

import (
	"net/http"
	"strconv"
	"strings"

	usersv1 "usersd/gen/users/v1"
	"usersd/handlers/restbody"
	"usersd/users"
)

func listUsersREST(service *users.Service, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		q, err := parseCollectionQuery(r, "role", "sort", "namePrefix", "filter", "page", "limit", "pagination", "cursor", "showDeleted")
		if err != nil {
			return err
		}
		showDeleted, err := q.flag("showDeleted")
		if err != nil {
			return err
		}
		p, err := q.paging()
		if err != nil {
			return err
		}
		if err := admitList(r.Context()); err != nil {
			return err
		}
		res, err := service.ListUsers(readContext(r), &usersv1.ListUsersRequest{
			Role: q.text("role"), Sort: q.text("sort"), NamePrefix: q.text("namePrefix"), Filter: q.text("filter"),
			Page: p.page, Limit: p.limit, PageToken: p.cursor, ShowDeleted: showDeleted,
		})
		if err != nil {
			return err
		}
		body, err := encodeList(r, res.GetUsers())
		if err != nil {
			return err
		}
		setListHeaders(w, r, q, p, res.GetTotalCount(), res.GetNextPageToken())
		writeJSONBytes(w, http.StatusOK, body)
		return nil
	})
}

func createUserREST(service *users.Service, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		key, err := idempotencyKey(r)
		if err != nil {
			return err
		}
		user := &usersv1.User{}
		if err := decodeBody(r, user, ""); err != nil { // a create has no id to compare: every output-only member goes
			return err
		}
		ctx, call := writeContext(r)
		res, err := service.CreateUser(ctx, &usersv1.CreateUserRequest{User: user, RequestId: key})
		if err != nil {
			return err
		}
		setCallHeaders(w.Header(), call)
		w.Header().Set("Location", "/users/"+strconv.Itoa(int(res.GetUser().GetId())))
		return writeUser(w, r, http.StatusCreated, res.GetUser())
	})
}

func getUserREST(service *users.Service, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		showDeleted, err := queryFlag(r, "showDeleted")
		if err != nil {
			return err
		}
		// GetUserRequest has no field for showDeleted (its fields are fixed): the call carries it.
		user, err := service.GetUser(readContextShowing(r, showDeleted), &usersv1.GetUserRequest{Id: id})
		if err != nil {
			return err
		}
		if value := strings.Join(r.Header["If-None-Match"], ", "); value != "" && noneMatch(value, user.GetEtag()) {
			w.Header().Set("ETag", user.GetEtag())
			w.WriteHeader(http.StatusNotModified) // the client's copy is current: no body
			return nil
		}
		return writeUser(w, r, http.StatusOK, user)
	})
}

func replaceUserREST(service *users.Service, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		user := &usersv1.User{}
		if err := decodeBody(r, user, "id"); err != nil {
			return err
		}
		ctx, call := writeContext(r)
		condition, err := writeCondition(ctx, service, r, id)
		if err != nil {
			return err
		}
		res, err := service.ReplaceUser(ctx, &usersv1.ReplaceUserRequest{Id: id, User: user, Etag: condition})
		if err != nil {
			return err
		}
		setCallHeaders(w.Header(), call)
		return writeUser(w, r, http.StatusOK, res.GetUser())
	})
}

func updateUserREST(service *users.Service, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		body, err := readBody(r, restbody.MediaTypeMergePatch, restbody.MediaTypeJSON)
		if err != nil {
			return err
		}
		user, mask, err := restbody.MergePatch(body)
		if err != nil {
			return err
		}
		ctx, call := writeContext(r)
		condition, err := writeCondition(ctx, service, r, id)
		if err != nil {
			return err
		}
		res, err := service.UpdateUser(ctx, &usersv1.UpdateUserRequest{Id: id, User: user, UpdateMask: mask, Etag: condition})
		if err != nil {
			return err
		}
		setCallHeaders(w.Header(), call)
		return writeUser(w, r, http.StatusOK, res.GetUser())
	})
}

func deleteUserREST(service *users.Service, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		purge, err := queryFlag(r, "purge")
		if err != nil {
			return err
		}
		ctx, call := writeContext(r)
		// A purge may remove a user that is deleted already: its condition is read among them.
		condition, err := writeCondition(readContextShowing(r.WithContext(ctx), purge), service, r, id)
		if err != nil {
			return err
		}
		if _, err := service.DeleteUser(ctx, &usersv1.DeleteUserRequest{Id: id, Etag: condition, Purge: purge}); err != nil {
			return err
		}
		setCallHeaders(w.Header(), call)
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

// undeleteUserREST is POST /users/{id}:undelete (AIP-164): 200 with the restored user.
func undeleteUserREST(service *users.Service, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		ctx, call := writeContext(r)
		// The user to restore is deleted: its condition is read among the deleted.
		condition, err := writeCondition(readContextShowing(r.WithContext(ctx), true), service, r, id)
		if err != nil {
			return err
		}
		user, err := service.UndeleteUser(ctx, &usersv1.UndeleteUserRequest{Id: id, Etag: condition})
		if err != nil {
			return err
		}
		setCallHeaders(w.Header(), call)
		return writeUser(w, r, http.StatusOK, user)
	})
}

// writeUser answers with one user and its entity tag.
func writeUser(w http.ResponseWriter, r *http.Request, status int, user *usersv1.User) error {
	w.Header()["Etag"] = []string{user.GetEtag()} // Set would canonicalise the constant again
	return writeMessage(w, r, status, user)
}

// pathID reads a path segment that must be a positive int32.
func pathID(r *http.Request, name string) (int32, error) {
	text := r.PathValue(name)
	id, err := strconv.ParseInt(text, 10, 32)
	// Only the canonical form names a user, so that one resource has one URL: not "+1" or "01".
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != text {
		return 0, users.InvalidField(name, "%s must be a positive integer up to %d, got %q", name, int32(^uint32(0)>>1), text)
	}
	return int32(id), nil
}
