package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"usersd/store"
	"usersd/store/sqlstore"
	"usersd/store/storetest"
)

func TestSQLiteFileConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "users.db"))
	})
}

func TestSQLiteInMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, ":memory:") })
}

func TestReopeningAFileKeepsItsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "users.db")
	first := open(t, path)
	u, err := first.CreateUser(context.Background(), store.NewUser{Name: "persistent"})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := open(t, path) // runs the migrations again: they must see they are applied
	defer second.Close()
	got, err := second.GetUser(context.Background(), u.ID)
	if err != nil || got.Name != "persistent" {
		t.Fatalf("after reopening: %+v, %v", got, err)
	}
}

func TestOpenRejectsAmbiguousPaths(t *testing.T) {
	for _, dsn := range []string{"", "users.db?mode=ro", "file:users.db", "postgres://localhost/db"} {
		if s, err := sqlstore.Open(context.Background(), dsn); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want an error", dsn)
		}
	}
}

func open(t *testing.T, dsn string) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	return s
}
