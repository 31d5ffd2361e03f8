package sqlstore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"usersd/store"
	"usersd/store/storetest"
)

// TestUpgradeFillsTheSearchKeys runs the Go step of the name_key migration on users that have no key
// yet, as an existing database has them on upgrade: across several batches, every user gets the key
// of its name, and a name search finds them all.
func TestUpgradeFillsTheSearchKeys(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	for _, backend := range []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"SQLite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "users.db") }},
		{"PostgreSQL", func(t *testing.T) string { return storetest.PostgresSchema(t) }},
	} {
		t.Run(backend.name, func(t *testing.T) {
			ctx := context.Background()
			s, err := Open(ctx, backend.dsn(t))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ms, err := s.dialect.migrations()
			if err != nil {
				t.Fatal(err)
			}
			var step *migration
			for i := range ms {
				if strings.HasSuffix(ms[i].name, "_name_key.sql") {
					step = &ms[i]
				}
			}
			if step == nil || step.then == nil {
				t.Fatalf("the %s migrations have no name_key file with a Go step", backend.name)
			}

			const users = 1203 // three batches and a bit
			for i := range users {
				name := fmt.Sprintf("Ädam %d", i)
				if i%2 == 1 {
					name = fmt.Sprintf("Kelvin \u212A %d", i)
				}
				if _, err := s.writer.Exec(`INSERT INTO users (name, role, created_at, updated_at) VALUES ($1, '', 0, 0)`, name); err != nil {
					t.Fatal(err)
				}
			}
			tx, err := s.writer.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if err := step.then(ctx, tx); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			rows, err := s.reader.Query(`SELECT name, name_key FROM users`)
			pairs, err := rowsOf(rows, err, func(row scanner) (p [2]string, err error) { return p, row.Scan(&p[0], &p[1]) })
			if err != nil || len(pairs) != users {
				t.Fatalf("%d users read back (%v), want %d", len(pairs), err, users)
			}
			for _, p := range pairs {
				if p[1] != store.NameKey(p[0]) {
					t.Fatalf("user %q has the key %q, want %q", p[0], p[1], store.NameKey(p[0]))
				}
			}
			for prefix, want := range map[string]int64{"äDAM": (users + 1) / 2, "kelvin k": users / 2} {
				page, err := s.ListUsers(ctx, store.UserQuery{NamePrefix: prefix, Limit: 1})
				if err != nil || page.Total != want {
					t.Fatalf("search %q found %d (%v), want %d", prefix, page.Total, err, want)
				}
			}
		})
	}
}
