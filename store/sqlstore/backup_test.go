package sqlstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"usersd/store"
	"usersd/store/sqlstore"
)

// TestBackupSQLite copies a database that is open and written to, and refuses what would not be a
// backup: a file that exists already (never replaced), a database that is not there, PostgreSQL.
func TestBackupSQLite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users.db")
	s := open(t, path)
	defer s.Close()
	for _, name := range []string{"ada", "grace"} {
		if _, err := s.CreateUser(t.Context(), store.NewUser{Name: name}, nil); err != nil {
			t.Fatal(err)
		}
	}
	dest := filepath.Join(dir, "copy.db")
	if err := sqlstore.BackupSQLite(context.Background(), path, dest); err != nil {
		t.Fatal(err)
	}
	copied := open(t, dest)
	defer copied.Close()
	page, err := copied.ListUsers(t.Context(), store.UserQuery{Limit: 10})
	if err != nil || len(page.Items) != 2 {
		t.Fatalf("the copy lists %v (%v); want the two users", page.Items, err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "*.partial-*"))
	if len(leftovers) > 0 {
		t.Fatalf("partial files left: %v", leftovers)
	}

	before, _ := os.ReadFile(dest)
	for _, c := range []struct{ name, from, to, want string }{
		{"a file that exists", path, dest, "exists already"},
		{"no database", filepath.Join(dir, "none.db"), filepath.Join(dir, "x.db"), "no such file"},
		{"PostgreSQL", "postgres://127.0.0.1/test", filepath.Join(dir, "y.db"), "pg_dump"},
	} {
		err := sqlstore.BackupSQLite(context.Background(), c.from, c.to)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", c.name, err, c.want)
		}
	}
	if after, _ := os.ReadFile(dest); string(after) != string(before) {
		t.Fatal("a refused backup changed the file that was there")
	}
}
