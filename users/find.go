package users

import (
	"context"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"
)

// MaxFindLimit is the most users one FindUsers answers: SCIM's largest count.
const MaxFindLimit = 1000

// FindQuery is a page of users as asked for by a face that speaks its own filter language (SCIM):
// the filter is already parsed and typed by the face, and the page is an offset, as SCIM's
// startIndex is. Every other rule of a list is ListUsers': deleted users are left out, the total
// is exact, and the store binds every value of the filter.
type FindQuery struct {
	Filter *store.Filter
	Sort   []store.SortKey
	Offset int64
	// Limit is the most users answered, 0 to MaxFindLimit; 0 answers the total alone.
	Limit int
}

// FindUsers answers the users of q's page and how many users q's filter holds for in all.
func (s *Service) FindUsers(ctx context.Context, q FindQuery) (page []*usersv1.User, total int64, err error) {
	if q.Offset < 0 {
		return nil, 0, InvalidField("offset", "the offset must not be negative, got %d", q.Offset)
	}
	if q.Limit < 0 || q.Limit > MaxFindLimit {
		return nil, 0, InvalidField("limit", "at most %d users a page, got %d", MaxFindLimit, q.Limit)
	}
	for _, key := range q.Sort {
		if !sortable(key.Field) && key.Field != store.SortByUserName {
			return nil, 0, InvalidField("sort", "cannot sort by %q", key.Field)
		}
		if key.Field == store.SortByUserName && len(q.Sort) > 1 {
			return nil, 0, InvalidField("sort", "a sort by %q takes no other sort key", key.Field)
		}
	}
	if ctx, err = forRead(ctx); err != nil {
		return nil, 0, err
	}
	// A store's page holds at least one user; the total of a page of none is the same.
	limit := max(q.Limit, 1)
	found, err := s.store.ListUsers(ctx, store.UserQuery{Filter: q.Filter, Sort: q.Sort, Offset: q.Offset, Limit: limit})
	if err != nil {
		return nil, 0, fromStore(err)
	}
	items := found.Items
	if q.Limit == 0 {
		items = nil
	}
	return mapSlice(items, userToProto), found.Total, nil
}
