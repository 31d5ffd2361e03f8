// REST adapters of the batch methods (AIP-231, 233, 235): custom methods on the collection, each
// answering its RPC's response message.
package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	usersv1 "usersd/gen/users/v1"
	"usersd/handlers/codec"
	"usersd/handlers/restbody"
	"usersd/users"
)

// batchGetUsersREST is GET /users:batchGet?ids=1&ids=2: 200 with the users in the order asked.
func batchGetUsersREST(service *users.Service, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		ids, err := queryIDs(r)
		if err != nil {
			return err
		}
		res, err := service.BatchGetUsers(readContext(r), &usersv1.BatchGetUsersRequest{Ids: ids})
		if err != nil {
			return err
		}
		return writeMessage(w, r, http.StatusOK, res)
	})
}

// queryIDs reads the ids parameter, given once per id, and refuses every other parameter, as the
// collection query does. Past the most a batch may hold, nothing more is read.
func queryIDs(r *http.Request) ([]int32, error) {
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, users.InvalidField("query", "malformed query string: %v", err)
	}
	for name := range values {
		if name != "ids" {
			field := strings.ToValidUTF8(name, "\uFFFD")
			if field == "" {
				field = "query"
			}
			return nil, users.InvalidField(field, "unknown query parameter %q; allowed: ids", field)
		}
	}
	texts := values["ids"]
	if len(texts) > users.MaxBatchSize {
		return nil, users.InvalidField("ids", "ids is given %d times; at most %d ids are allowed in one batch", len(texts), users.MaxBatchSize)
	}
	ids := make([]int32, len(texts))
	for i, text := range texts {
		id, err := strconv.ParseInt(text, 10, 32)
		// Only the canonical form names a user, as in a path: not "+1" or "01".
		if err != nil || id <= 0 || strconv.FormatInt(id, 10) != text {
			field := fmt.Sprintf("ids[%d]", i)
			if !utf8.ValidString(text) {
				text = strings.ToValidUTF8(text, "\uFFFD")
			}
			return nil, users.InvalidField(field, "%s must be a positive integer up to %d, got %q", field, int32(^uint32(0)>>1), text)
		}
		ids[i] = int32(id)
	}
	return ids, nil
}

// batchCreateUsersREST is POST /users:batchCreate: 200 with the created users, in order. The
// Idempotency-Key header stands for the body's requestId, as on POST /users.
func batchCreateUsersREST(service *users.Service, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		key, err := idempotencyKey(r)
		if err != nil {
			return err
		}
		body, err := readBody(r, restbody.MediaTypeJSON)
		if err != nil {
			return err
		}
		// Each user's output-only members are ignored whatever their values, as POST /users
		// ignores them, so that users read elsewhere may be sent as they are.
		req := &usersv1.BatchCreateUsersRequest{}
		body = restbody.WithoutOutputOnlyInList(body, req.ProtoReflect().Descriptor(), "requests", "user")
		if err := codec.UnmarshalJSON(body, req); err != nil {
			return users.InvalidField("body", "%v", err)
		}
		if key != "" {
			if req.GetRequestId() != "" && req.GetRequestId() != key {
				return users.InvalidField(idempotencyKeyHeader, "%s and the body's requestId differ: send the key once", idempotencyKeyHeader)
			}
			req.RequestId = key
		}
		ctx, call := writeContext(r)
		res, err := service.BatchCreateUsers(ctx, req)
		if err != nil {
			return err
		}
		setCallHeaders(w.Header(), call)
		return writeMessage(w, r, http.StatusOK, res)
	})
}

// batchDeleteUsersREST is POST /users:batchDelete: 200 with the users as deleted while they can be
// restored (none when the server removes them at once).
func batchDeleteUsersREST(service *users.Service, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		req := &usersv1.BatchDeleteUsersRequest{}
		if err := decodeBody(r, req, ""); err != nil {
			return err
		}
		ctx, call := writeContext(r)
		res, err := service.BatchDeleteUsers(ctx, req)
		if err != nil {
			return err
		}
		setCallHeaders(w.Header(), call)
		return writeMessage(w, r, http.StatusOK, res)
	})
}
