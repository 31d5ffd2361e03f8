// REST adapters for /users/{id}/posts.
package handlers

import (
	"net/http"

	usersv1 "usersd/gen/users/v1"
	"usersd/users"
)

func listPostsREST(service *users.Service, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		userID, err := pathID(r, "id")
		if err != nil {
			return err
		}
		q, err := parseCollectionQuery(r, "page", "limit", "pagination", "cursor")
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
		res, err := service.ListUserPosts(readContext(r), &usersv1.ListUserPostsRequest{UserId: userID, Page: p.page, Limit: p.limit, PageToken: p.cursor})
		if err != nil {
			return err
		}
		body, err := encodeList(r, res.GetPosts())
		if err != nil {
			return err
		}
		setListHeaders(w, r, q, p, res.GetTotalCount(), res.GetNextPageToken())
		writeJSONBytes(w, http.StatusOK, body)
		return nil
	})
}

func createPostREST(service *users.Service, errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		userID, err := pathID(r, "id")
		if err != nil {
			return err
		}
		key, err := idempotencyKey(r)
		if err != nil {
			return err
		}
		post := &usersv1.Post{}
		if err := decodeBody(r, post, "user_id"); err != nil {
			return err
		}
		ctx, call := writeContext(r)
		res, err := service.CreateUserPost(ctx, &usersv1.CreateUserPostRequest{UserId: userID, Post: post, RequestId: key})
		if err != nil {
			return err
		}
		setCallHeaders(w.Header(), call)
		return writeMessage(w, r, http.StatusCreated, res.GetPost())
	})
}
