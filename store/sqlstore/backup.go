// A consistent copy of a SQLite database while it serves. Copying the file is not one: the newest
// writes are in the write-ahead log beside it, and a copy taken while a checkpoint runs may be
// torn. VACUUM INTO writes the database as one read transaction sees it, which WAL lets run
// beside the service's writes.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// BackupSQLite writes a consistent copy of the SQLite database at path to dest, while other
// processes read and write it. dest must not exist: a file, a folder or a symlink there is refused
// and left as it is, never followed. The copy gets the database file's own mode, whatever the
// umask, and is written in a fresh folder beside dest that only this user may enter, synced, and
// then given its name, so dest is never a partial copy and no other local user can put a file
// or a link where the copy is being written.
func BackupSQLite(ctx context.Context, path, dest string) (err error) {
	if path == ":memory:" || isPostgresURL(path) {
		return errors.New("backup copies a SQLite file; for PostgreSQL use its own tools (pg_dump, pg_basebackup)")
	}
	database, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("the database: %w", err)
	}
	if _, err := os.Lstat(dest); err == nil {
		return errDestinationExists(dest)
	}
	dir := filepath.Dir(dest)
	// VACUUM INTO creates the copy itself, with SQLite's mode less the umask, so it must not create
	// it where others can reach: a folder of mode 0700 that nobody else can enter, on the same
	// file system as dest so that the finished copy can be linked into place.
	private, err := os.MkdirTemp(dir, filepath.Base(dest)+".partial-*")
	if err != nil {
		return fmt.Errorf("the backup's folder: %w", err)
	}
	defer os.RemoveAll(private)
	partialPath := filepath.Join(private, filepath.Base(dest))

	uri, err := sqliteURI(path, sqliteSettings)
	if err != nil {
		return err
	}
	db, err := sql.Open("sqlite", uri)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, partialPath); err != nil {
		return fmt.Errorf("copy %s: %w", path, err)
	}
	if err := os.Chmod(partialPath, database.Mode().Perm()); err != nil {
		return fmt.Errorf("the backup's mode: %w", err)
	}
	if err := syncFile(partialPath); err != nil {
		return err
	}
	// A link, not a rename: it fails if dest has appeared meanwhile, where a rename would replace
	// it; and it does not follow a symlink at dest.
	if err := os.Link(partialPath, dest); errors.Is(err, fs.ErrExist) {
		return errDestinationExists(dest)
	} else if err != nil {
		return fmt.Errorf("the backup: %w", err)
	}
	return syncFile(dir) // the new name itself
}

func errDestinationExists(dest string) error {
	return fmt.Errorf("%s exists already: a backup never replaces a file, nor follows a link", dest)
}

// syncFile flushes a file, or a folder's entries, to the disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}
