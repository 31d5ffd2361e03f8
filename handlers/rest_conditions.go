// The preconditions of REST writes (RFC 9110 section 13): If-Match and If-None-Match on PUT, PATCH
// and DELETE of a user, turned into the one etag condition that the RPCs take.
package handlers

import (
	"context"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/users"
)

// writeCondition returns the etag condition of a REST write of user id. If-Match alone is passed on
// as it is, and the store checks it in the write statement itself. Otherwise, when the request has
// If-None-Match, or an If-Match header with no tags in it, the user is read first: a missing user is
// 404 whatever the condition; If-Match is evaluated first, then If-None-Match; a failed condition is
// 412. A passed one becomes If-Match on the etag just read, so that the write happens only if the
// user is still as checked (a write in between is answered 412, and the client reads again).
func writeCondition(ctx context.Context, service *users.Service, r *http.Request, id int32) (string, error) {
	ifMatch, hasIfMatch := headerList(r, "If-Match")
	ifNoneMatch, hasIfNoneMatch := headerList(r, "If-None-Match")
	if !hasIfNoneMatch && (!hasIfMatch || ifMatch != "") {
		return ifMatch, nil
	}
	// A malformed list is 400, before the user is read.
	matchTags, err := parseTagList(ifMatch)
	if err != nil {
		return "", err
	}
	noneTags, err := parseTagList(ifNoneMatch)
	if err != nil {
		return "", err
	}
	user, err := service.GetUser(ctx, &usersv1.GetUserRequest{Id: id})
	if err != nil {
		return "", err
	}
	current := user.GetEtag()
	if hasIfMatch && !matchTags.HoldsStrong(current) {
		return "", users.NewError(connect.CodeAborted, users.ReasonEtagMismatch,
			"If-Match does not match the user's etag %s; read the user again", current)
	}
	if hasIfNoneMatch && noneTags.HoldsWeak(current) {
		return "", users.NewError(connect.CodeAborted, users.ReasonEtagMismatch,
			"If-None-Match matches the user's etag %s", current)
	}
	return current, nil
}

// noneMatch reports whether an If-None-Match value matches a current etag, comparing weakly (the
// W/ prefix is ignored). A value that does not parse matches nothing, so the full answer is sent.
func noneMatch(value, current string) bool {
	tags, err := users.ParseEntityTags(value)
	return err == nil && tags.HoldsWeak(current)
}

// headerList returns a header's lines joined into one list ("" when it holds only empty elements),
// and whether the header was sent at all: an If-Match sent empty is a list of no tags, which no
// etag matches, not an absent condition.
func headerList(r *http.Request, name string) (list string, present bool) {
	lines := r.Header.Values(name)
	list = strings.Join(lines, ", ")
	if strings.Trim(list, " \t,") == "" {
		list = ""
	}
	return list, lines != nil
}

// parseTagList is users.ParseEntityTags for a list that headerList may have found empty (the
// header absent, or holding no tags), which holds no tags rather than being malformed.
func parseTagList(list string) (users.EntityTags, error) {
	if list == "" {
		return users.EntityTags{}, nil
	}
	return users.ParseEntityTags(list)
}
