package sqlstore

import (
	"context"
	"fmt"
	"testing"

	"usersd/store"
)

// beforeFilters is the last migration of each backend before the filter's label table.
var beforeFilters = map[string]int{"sqlite": 12, "postgres": 18}

// TestAnOlderDatabaseMigratesToFilters opens a database that the release before filters wrote,
// with labelled users across several of the backfill's batches, one of them deleted: the label
// filters find each user by the labels it had, and follow the labels' writes from then on.
func TestAnOlderDatabaseMigratesToFilters(t *testing.T) {
	t.Parallel()
	for _, backend := range bothBackends {
		t.Run(backend.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := backend.dsn(t)
			old := migrateThrough(t, dsn, beforeFilters[backend.name])
			const users = 2*backfillBatch + 17
			tx, err := old.Begin()
			if err != nil {
				t.Fatal(err)
			}
			for i := range users {
				labels := "{}"
				if i%10 == 0 {
					labels = fmt.Sprintf(`{"team":"t%d","tier":"gold"}`, i%3)
				}
				name := fmt.Sprintf("Old user %d", i)
				// The columns, and only those, that the previous release's CreateUser wrote.
				if _, err := tx.Exec(`INSERT INTO users (name, name_key, role, created_at, updated_at, version, changed_by, changed_by_type,
					user_name, user_name_key, given_name, family_name, email, email_key, external_id, active, labels)
					VALUES ($1, $2, '', 1000, 2000, 1, 'key', 1, '', '', '', '', '', '', '', $3, $4)`,
					name, store.NameKey(name), i%7 != 0, labels); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := tx.Exec(`UPDATE users SET delete_time = 3000, purge_time = 4000 WHERE name = 'Old user 20'`); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			old.Close()

			s, err := Open(ctx, dsn)
			if err != nil {
				t.Fatalf("open the older database: %v", err)
			}
			defer s.Close()
			total := func(f store.Filter, showDeleted bool) int64 {
				page, err := s.ListUsers(ctx, store.UserQuery{Filter: &f, Limit: 1, ShowDeleted: showDeleted})
				if err != nil {
					t.Fatal(err)
				}
				return page.Total
			}
			gold := store.Filter{Op: store.FilterCompare, Field: store.FieldLabel, Key: "tier", Cmp: store.CompareEqual,
				Value: store.FilterValue{Kind: store.ValueString, String: "gold"}}
			team0 := store.Filter{Op: store.FilterCompare, Field: store.FieldLabel, Key: "team", Cmp: store.CompareEqual,
				Value: store.FilterValue{Kind: store.ValueString, String: "t0"}}
			inactive := store.Filter{Op: store.FilterCompare, Field: store.FieldActive, Cmp: store.CompareEqual,
				Value: store.FilterValue{Kind: store.ValueBool}}
			labelled, labelledTeam0, inactiveUsers := int64(0), int64(0), int64(0)
			for i := range users {
				if i%10 == 0 {
					labelled++
					if i%3 == 0 {
						labelledTeam0++
					}
				}
				if i%7 == 0 {
					inactiveUsers++
				}
			}
			got := [4]int64{total(gold, true), total(gold, false), total(team0, true), total(inactive, true)}
			if want := [4]int64{labelled, labelled - 1, labelledTeam0, inactiveUsers}; got != want {
				t.Fatalf("after the upgrade, gold (shown deleted, not), team t0, inactive: %v, want %v", got, want)
			}
			page, err := s.ListUsers(ctx, store.UserQuery{Filter: &gold, Limit: 1})
			if err != nil || len(page.Items) != 1 {
				t.Fatalf("the first gold user: %+v, %v", page, err)
			}
			first := page.Items[0]
			silver := "silver"
			if _, err := s.UpdateUser(ctx, first.ID, store.UserChanges{LabelChanges: map[string]*string{"tier": &silver}}, nil); err != nil {
				t.Fatal(err)
			}
			if total(gold, true) != labelled-1 {
				t.Fatalf("after an upgraded user's label changed, gold finds %d, want %d", total(gold, true), labelled-1)
			}
		})
	}
}
