package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"usersd/store"
)

// scopeFilters are the filters on active, on the role, on labels' values and on labels' keys that
// kept counts serve, over the roles and labels the scope tests draw from.
func scopeFilters() []store.Filter {
	active := func(c store.Comparison, b bool) store.Filter {
		return store.Filter{Op: store.FilterCompare, Field: store.FieldActive, Cmp: c, Value: store.FilterValue{Kind: store.ValueBool, Bool: b}}
	}
	filters := []store.Filter{
		active(store.CompareEqual, true), active(store.CompareEqual, false),
		active(store.CompareNotEqual, true), active(store.CompareNotEqual, false),
	}
	for _, role := range []string{"", "admin", "viewer", "absent"} {
		for _, c := range []store.Comparison{store.CompareEqual, store.CompareNotEqual} {
			filters = append(filters, store.Filter{Op: store.FilterCompare, Field: store.FieldRole, Cmp: c,
				Value: store.FilterValue{Kind: store.ValueString, String: role}})
		}
	}
	for _, key := range []string{"team", "tier", "absent"} {
		filters = append(filters, store.Filter{Op: store.FilterHasLabel, Key: key})
		for _, value := range []string{"a", "b", "c"} {
			filters = append(filters, store.Filter{Op: store.FilterCompare, Field: store.FieldLabel, Key: key, Cmp: store.CompareEqual,
				Value: store.FilterValue{Kind: store.ValueString, String: value}})
		}
	}
	return filters
}

// randomIdentity is an identity with a random active and up to two labels.
func randomIdentity(rng *rand.Rand) store.Identity {
	id := store.Identity{Inactive: rng.IntN(3) == 0}
	for _, key := range []string{"team", "tier"} {
		if rng.IntN(2) == 0 {
			if id.Labels == nil {
				id.Labels = map[string]string{}
			}
			id.Labels[key] = []string{"a", "b", "c"}[rng.IntN(3)]
		}
	}
	return id
}

// randomRole is one of the roles the scope tests draw from ("" for none).
func randomRole(rng *rand.Rand) string { return []string{"", "admin", "viewer"}[rng.IntN(3)] }

// scopeWrite makes one random write of the users in ids: a create, a batch create, a change of
// active, labels or role, a soft delete, a restore, a purge or a delete. It returns the ids created.
func scopeWrite(ctx context.Context, s *Store, rng *rand.Rand, ids []int32) ([]int32, error) {
	id := int32(0)
	if len(ids) > 0 {
		id = ids[rng.IntN(len(ids))]
	}
	var err error
	switch draw := rng.IntN(9); {
	case draw == 0 || id == 0:
		var u store.User
		u, err = s.CreateUser(ctx, store.NewUser{Name: "scoped", Role: randomRole(rng), Identity: randomIdentity(rng)}, nil)
		return []int32{u.ID}, err
	case draw == 1:
		var us []store.User
		us, err = s.CreateUsers(ctx, []store.NewUser{{Name: "a", Identity: randomIdentity(rng)}, {Name: "b", Identity: randomIdentity(rng)}}, nil)
		var created []int32
		for _, u := range us {
			created = append(created, u.ID)
		}
		return created, err
	case draw == 2:
		inactive := rng.IntN(2) == 0
		_, err = s.UpdateUser(ctx, id, store.UserChanges{Inactive: &inactive}, nil)
	case draw == 3:
		labels := randomIdentity(rng).Labels
		if labels == nil {
			labels = map[string]string{}
		}
		_, err = s.UpdateUser(ctx, id, store.UserChanges{Labels: &labels}, nil)
	case draw == 4:
		value := []string{"a", "b", "c"}[rng.IntN(3)]
		_, err = s.UpdateUser(ctx, id, store.UserChanges{LabelChanges: map[string]*string{"team": &value, "tier": nil}}, nil)
	case draw == 5 && rng.IntN(2) == 0:
		role := randomRole(rng)
		_, err = s.UpdateUser(ctx, id, store.UserChanges{Role: &role}, nil)
	case draw == 5:
		_, err = s.SoftDeleteUser(ctx, id, nil, time.Now().Add(time.Hour))
	case draw == 6:
		_, err = s.UndeleteUser(ctx, id, nil)
	case draw == 7:
		err = s.PurgeUser(ctx, id, nil)
	default:
		err = s.DeleteUser(ctx, id, nil)
	}
	if errors.Is(err, store.ErrNotFound) {
		err = nil
	}
	return nil, err
}

// TestFilterScopeTotalsStayExact changes users' active and labels, creates, deletes, restores and
// purges them, and checks the totals of the filters on active and on labels against the users
// listed, before and after folds and concurrently with writes, on both backends; then rebuilds the
// kept counts from a snapshot, as after the migration, under writes.
func TestFilterScopeTotalsStayExact(t *testing.T) {
	for name, dsn := range rangeBackends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := openStore(t, dsn(t))
			rng := rand.New(rand.NewPCG(11, 11))
			var ids []int32
			for round := range 8 {
				for range 60 {
					created, err := scopeWrite(ctx, s, rng, ids)
					if err != nil {
						t.Fatal(err)
					}
					ids = append(ids, created...)
				}
				wantExactAroundAFold(t, s, fmt.Sprint("round ", round), scopeFilters)
			}

			// Kept counts gone and wrong, then built again while writers write.
			for _, stmt := range []string{`DELETE FROM user_count_buckets WHERE kind = 0`,
				`UPDATE user_counts SET n = n + 5 WHERE scope LIKE 'label:%'`, `DELETE FROM user_counts WHERE scope = 'inactive'`} {
				if _, err := s.writer.Exec(stmt); err != nil {
					t.Fatal(err)
				}
			}
			newWriter := func(w int) func() error {
				rng := rand.New(rand.NewPCG(uint64(w), 12))
				return func() error {
					_, err := scopeWrite(ctx, s, rng, ids)
					return err
				}
			}
			whileWritesAndABuild(t, s, 3, 2*time.Second, newWriter, func() { wantExactTotals(t, s, "under writes", scopeFilters()) })
			wantExactTotals(t, s, "after the rebuild", scopeFilters())
			fold(t, s)
			wantExactTotals(t, s, "after a last fold", scopeFilters())
			if _, err := s.RecountUsers(ctx); err != nil {
				t.Fatal(err)
			}
			wantExactTotals(t, s, "after a recount", scopeFilters())
			wantLabelRowsOfUsers(t, s)
		})
	}
}

// wantLabelRowsOfUsers fails the test unless the label side table holds one row for each label of
// each user there is, and none of a user that is gone (purged or deleted for good).
func wantLabelRowsOfUsers(t *testing.T, s *Store) {
	t.Helper()
	labelsOf := `json_each(u.labels)`
	if s.dialect == &postgresDialect {
		labelsOf = `jsonb_each_text(u.labels::jsonb)`
	}
	var orphans, rows, labels int64
	if err := s.reader.QueryRow(`SELECT (SELECT COUNT(*) FROM user_labels AS l WHERE NOT EXISTS (SELECT 1 FROM users AS u WHERE u.id = l.user_id)),
		(SELECT COUNT(*) FROM user_labels), (SELECT COUNT(*) FROM users AS u, `+labelsOf+`)`).Scan(&orphans, &rows, &labels); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 || rows != labels {
		t.Fatalf("user_labels holds %d rows, %d of them of users that are gone; the users have %d labels", rows, orphans, labels)
	}
}

// TestWritesDuringABuildAreCountedOnce: the kept counts of the users already there are built from
// a snapshot, and writes that commit between the snapshot and the build's own writes must count
// once, neither lost nor twice: a hard delete of a labelled, inactive user whose scopes the build
// has not written yet, a create and a soft delete, each in that window.
func TestWritesDuringABuildAreCountedOnce(t *testing.T) {
	for name, dsn := range rangeBackends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := openStore(t, dsn(t))
			labelled := store.Identity{Inactive: true, Labels: map[string]string{"team": "a"}}
			var ids []int32
			for range 6 {
				u, err := s.CreateUser(ctx, store.NewUser{Name: "before", Identity: labelled}, nil)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, u.ID)
			}
			fold(t, s)
			// As after the migration: no kept counts of these users yet.
			for _, stmt := range []string{`DELETE FROM user_count_buckets`,
				`DELETE FROM user_counts WHERE scope LIKE 'label%' OR scope = 'inactive'`} {
				if _, err := s.writer.Exec(stmt); err != nil {
					t.Fatal(err)
				}
			}
			afterBuildSnapshot = func(built *Store) {
				if built != s {
					return
				}
				if err := s.DeleteUser(ctx, ids[0], nil); err != nil {
					t.Error(err)
				}
				if _, err := s.SoftDeleteUser(ctx, ids[1], nil, time.Now().Add(time.Hour)); err != nil {
					t.Error(err)
				}
				if _, err := s.CreateUser(ctx, store.NewUser{Name: "during", Identity: labelled}, nil); err != nil {
					t.Error(err)
				}
			}
			t.Cleanup(func() { afterBuildSnapshot = nil })
			if whole, err := s.buildCountBuckets(ctx); err != nil || !whole {
				t.Fatalf("build: whole %v, %v", whole, err)
			}
			afterBuildSnapshot = nil
			wantExactAroundAFold(t, s, "after a build with writes in its window", scopeFilters)
		})
	}
}

// TestInsertsOfManyRowsAreCountedRowByRow: a batch create of several statements' worth of users
// of mixed roles, active and labels, and an INSERT of many rows through SQL that also holds
// deleted users (as a replica of an older release or a bulk load may write), are counted in every
// kept total as their users are: the filters' scopes, the roles' with and without the deleted
// users, and the ranges of ids and creation times, before a fold and after it. (On PostgreSQL the
// triggers of an insert run once per statement and sum the deltas of each scope, migration 0023.)
func TestInsertsOfManyRowsAreCountedRowByRow(t *testing.T) {
	for name, dsn := range rangeBackends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := openStore(t, dsn(t))
			rng := rand.New(rand.NewPCG(23, 23))
			batch := make([]store.NewUser, 1100) // statements of 500, 500, 64, 32 and 4 rows on PostgreSQL
			for i := range batch {
				batch[i] = store.NewUser{Name: fmt.Sprint("batch ", i), Role: randomRole(rng), Identity: randomIdentity(rng)}
			}
			created, err := s.CreateUsers(ctx, batch, nil)
			if err != nil {
				t.Fatal(err)
			}
			var ids, times []int64
			for _, u := range created {
				ids, times = append(ids, int64(u.ID)), append(times, u.CreatedAt.UnixMicro())
			}
			var rows []string
			for i := range 300 {
				deleted := "NULL"
				if i%4 == 0 {
					deleted = "2"
				}
				labels := []string{`{}`, `{"team":"a"}`, `{"team":"b","tier":"c"}`}[i%3]
				rows = append(rows, fmt.Sprintf(`('sql %d', 'sql %d', '%s', %d, %d, %s, %s, %v, '%s')`,
					i, i, randomRole(rng), 1000+i, 1000+i, deleted, deleted, i%5 != 0, labels))
			}
			if _, err := s.writer.Exec(`INSERT INTO users (name, name_key, role, created_at, updated_at, delete_time, purge_time, active, labels)
				VALUES ` + strings.Join(rows, ", ")); err != nil {
				t.Fatal(err)
			}
			filters := func() []store.Filter {
				return append(scopeFilters(), randomRanges(rng, ids, append(times, 1000, 1150), 40)...)
			}
			roleTotals := func(when string) {
				t.Helper()
				for _, role := range []string{"", "admin", "viewer", "absent"} {
					for _, showDeleted := range []bool{false, true} {
						page, err := s.ListUsers(ctx, store.UserQuery{Role: role, ShowDeleted: showDeleted, Limit: 1_000_000})
						if err != nil || page.Total != int64(len(page.Items)) {
							t.Fatalf("%s: role %q (deleted shown %v): total %d, %d users listed, %v", when, role, showDeleted, page.Total, len(page.Items), err)
						}
					}
				}
			}
			roleTotals("before a fold")
			wantExactAroundAFold(t, s, "after inserts of many rows", filters)
			roleTotals("after a fold")
		})
	}
}
