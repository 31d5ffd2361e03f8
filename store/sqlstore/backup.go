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
	"os"
	"path/filepath"
)

// BackupSQLite writes a consistent copy of the SQLite database at path to dest, while other
// processes read and write it. dest must not exist; the copy is written beside it under a
// temporary name, synced, and then given its name, so dest is never a partial copy.
func BackupSQLite(ctx context.Context, path, dest string) (err error) {
	if path == ":memory:" || isPostgresURL(path) {
		return errors.New("backup copies a SQLite file; for PostgreSQL use its own tools (pg_dump, pg_basebackup)")
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("the database: %w", err)
	}
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("%s exists already: a backup never replaces a file", dest)
	}
	dir := filepath.Dir(dest)
	partial, err := os.CreateTemp(dir, filepath.Base(dest)+".partial-*")
	if err != nil {
		return fmt.Errorf("the backup's folder: %w", err)
	}
	partialPath := partial.Name()
	partial.Close()
	os.Remove(partialPath) // VACUUM INTO wants to create the file itself
	defer func() {
		if err != nil {
			os.Remove(partialPath)
		}
	}()

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
	if err := syncFile(partialPath); err != nil {
		return err
	}
	// A link, not a rename: it fails if dest has appeared meanwhile, where a rename would replace it.
	if err := os.Link(partialPath, dest); err != nil {
		return fmt.Errorf("the backup: %w", err)
	}
	os.Remove(partialPath)
	return syncFile(dir) // the new name itself
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
