//go:build unix

package sqlstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"usersd/store"
	"usersd/store/sqlstore"
)

// TestABackupHasTheDatabasesModeWhateverTheUmask: a copy of a database that only its owner and
// group may read must not be readable by everyone because the umask of whoever runs the backup
// allows it. The umask is the process's, so this test sets it and puts it back.
func TestABackupHasTheDatabasesModeWhateverTheUmask(t *testing.T) {
	for _, c := range []struct {
		name  string
		mode  os.FileMode
		umask int
	}{
		{"0640 under umask 022", 0o640, 0o022},
		{"0640 under umask 000", 0o640, 0o000},
		{"0600 under umask 022", 0o600, 0o022},
		{"0660 under umask 077", 0o660, 0o077},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "users.db")
			s := open(t, path)
			defer s.Close()
			if _, err := s.CreateUser(t.Context(), store.NewUser{Name: "ada"}, nil); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, c.mode); err != nil {
				t.Fatal(err)
			}
			previous := syscall.Umask(c.umask)
			defer syscall.Umask(previous)
			dest := filepath.Join(dir, "copy.db")
			if err := sqlstore.BackupSQLite(context.Background(), path, dest); err != nil {
				t.Fatal(err)
			}
			info, err := os.Lstat(dest)
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Mode(); got != c.mode {
				t.Errorf("the backup's mode is %v, want the database's %v", got, c.mode)
			}
		})
	}
}

// TestABackupNeverFollowsASymlinkAtItsName: a link that another local user planted where the
// backup goes, to a file the backup would overwrite or create, is refused as a file that exists
// already. The backup writes nothing through it, and the link is left as it was.
func TestABackupNeverFollowsASymlinkAtItsName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users.db")
	s := open(t, path)
	defer s.Close()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, target string }{
		{"to a file that exists", victim},
		{"to a file that does not exist yet", filepath.Join(dir, "created-through-the-link")},
	} {
		t.Run(c.name, func(t *testing.T) {
			dest := filepath.Join(dir, "copy-"+filepath.Base(c.target)+".db")
			if err := os.Symlink(c.target, dest); err != nil {
				t.Fatal(err)
			}
			err := sqlstore.BackupSQLite(context.Background(), path, dest)
			if err == nil || !strings.Contains(err.Error(), "exists already") {
				t.Fatalf("a backup onto a symlink: %v; want it refused as a file that exists already", err)
			}
			if target, err := os.Readlink(dest); err != nil || target != c.target {
				t.Errorf("the link now points to %q (%v), want %q as it was", target, err, c.target)
			}
		})
	}
	if kept, _ := os.ReadFile(victim); string(kept) != "kept" {
		t.Errorf("the link's target now holds %q", kept)
	}
	if _, err := os.Lstat(filepath.Join(dir, "created-through-the-link")); err == nil {
		t.Error("the backup created the link's target")
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, "*.partial-*")); len(leftovers) > 0 {
		t.Errorf("partial copies left: %v", leftovers)
	}
}
