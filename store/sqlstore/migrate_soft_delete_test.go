package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"usersd/store"
)

// beforeSoftDelete is the last migration of each backend before soft delete: the schema that the
// release before it wrote.
var beforeSoftDelete = map[string]int{"sqlite": 11, "postgres": 16}

// TestAnOlderDatabaseMigratesToSoftDelete opens a database that the release before soft delete
// wrote, with users, posts and changes in it: every user reads back live, the totals are those of
// before, and soft delete, undelete and purge work on those users, their counts and their changes.
func TestAnOlderDatabaseMigratesToSoftDelete(t *testing.T) {
	t.Parallel()
	for _, backend := range bothBackends {
		t.Run(backend.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := backend.dsn(t)
			old := migrateThrough(t, dsn, beforeSoftDelete[backend.name])
			const users = 10
			for i := range users {
				name, role := fmt.Sprintf("Old user %d", i), map[bool]string{true: "admin", false: "viewer"}[i%2 == 0]
				// The columns, and only those, that the previous release's CreateUser wrote.
				if _, err := old.Exec(`INSERT INTO users (name, name_key, role, created_at, updated_at, version, changed_by, changed_by_type,
					user_name, user_name_key, given_name, family_name, email, email_key, external_id, active, labels)
					VALUES ($1, $2, $3, 1000, 2000, 3, 'key', 1, $4, $5, '', '', '', '', '', TRUE, '{}')`,
					name, store.NameKey(name), role, fmt.Sprintf("old%d", i), store.NameKey(fmt.Sprintf("old%d", i))); err != nil {
					t.Fatal(err)
				}
			}
			var first int32
			if err := old.QueryRow(`SELECT MIN(id) FROM users`).Scan(&first); err != nil {
				t.Fatal(err)
			}
			if _, err := old.Exec(`INSERT INTO posts (user_id, title, body, created_at) VALUES ($1, 'old post', '', 1000)`, first); err != nil {
				t.Fatal(err)
			}
			old.Close()

			s, err := Open(ctx, dsn)
			if err != nil {
				t.Fatalf("open the older database: %v", err)
			}
			defer s.Close()
			total := func(role string, showDeleted bool) int64 {
				page, err := s.ListUsers(ctx, store.UserQuery{Role: role, Limit: users + 1, ShowDeleted: showDeleted})
				if err != nil || int64(len(page.Items)) != page.Total {
					t.Fatalf("list role %q (deleted %v): %d listed, total %d, %v", role, showDeleted, len(page.Items), page.Total, err)
				}
				return page.Total
			}
			if got := [3]int64{total("", false), total("admin", false), total("", true)}; got != [3]int64{users, users / 2, users} {
				t.Fatalf("totals after the upgrade (all, admins, all shown) = %v", got)
			}
			u, err := s.GetUser(ctx, first)
			if err != nil || u.Deleted() || !u.PurgeTime.IsZero() || u.Version != 3 || u.UserName != "old0" {
				t.Fatalf("user %d after the upgrade: %+v (%v), want it as it was, not deleted", first, u, err)
			}

			deleted, err := s.SoftDeleteUser(ctx, first, store.IfVersion{3}, time.Now().Add(time.Hour))
			if err != nil || !deleted.Deleted() {
				t.Fatalf("soft delete of an older user: %+v, %v", deleted, err)
			}
			if _, err := s.ListPosts(ctx, first, store.PostQuery{Limit: 10}); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the posts of a deleted older user: %v, want ErrNotFound", err)
			}
			if got := [3]int64{total("", false), total("admin", false), total("", true)}; got != [3]int64{users - 1, users/2 - 1, users} {
				t.Fatalf("totals after a soft delete (all, admins, all shown) = %v", got)
			}
			if _, err := s.CreateUser(ctx, store.NewUser{Name: "copy", Identity: store.Identity{UserName: "OLD0"}}, nil); !errors.Is(err, store.ErrAlreadyExists) {
				t.Fatalf("a create with the deleted user's user name: %v, want ErrAlreadyExists", err)
			}
			if _, err := s.UndeleteUser(ctx, first, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.PurgeUser(ctx, first, nil); err != nil {
				t.Fatal(err)
			}
			if got := [3]int64{total("", false), total("admin", false), total("", true)}; got != [3]int64{users - 1, users/2 - 1, users - 1} {
				t.Fatalf("totals after a purge (all, admins, all shown) = %v", got)
			}
			events, err := s.UserEvents(ctx, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []store.EventKind
			for _, e := range events.Events {
				if e.User.ID == first {
					kinds = append(kinds, e.Kind)
					if e.User.Name != "" || e.User.UserName != "" {
						t.Errorf("a change of the purged user keeps its name: %+v", e.User)
					}
				}
			}
			if want := []store.EventKind{store.EventCreated, store.EventDeleted, store.EventUndeleted, store.EventPurged}; fmt.Sprint(kinds) != fmt.Sprint(want) {
				t.Fatalf("the changes of the older user: %v, want %v", kinds, want)
			}
			counts, err := s.RecountUsers(ctx)
			if err != nil || counts["all"] != users-1 || counts["role:admin"] != users/2-1 {
				t.Fatalf("a recount after the upgrade: %v, %v", counts, err)
			}
		})
	}
}
