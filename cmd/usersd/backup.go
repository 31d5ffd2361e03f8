// usersd backup: a consistent copy of the SQLite database while the service runs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"usersd/store/sqlstore"
)

// runBackup is `usersd backup [-db PATH] FILE`: it copies the database that -db (or USERS_DB, as
// for serving) names to FILE, which must not exist.
func runBackup(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("usersd backup", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s := &settings{fs: fs, getenv: getenv}
	var db string
	s.string(&db, "db", "USERS_DB", "data/users.db", "the SQLite file to copy")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, "usersd backup [-db PATH] FILE: write a consistent copy of the SQLite database to FILE, which must not\n"+
			"exist, while the service reads and writes it. Restore by stopping the service and putting the copy\n"+
			"in place of the database file (see docs/BACKUPS.md, \"Restoring SQLite\").\n\n")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil
	} else if err != nil {
		return fmt.Errorf("backup: %w (usersd backup -h says how)", err)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("backup takes one file to write, got %d arguments (usersd backup -h says how)", fs.NArg())
	}
	dest := fs.Arg(0)
	if err := sqlstore.BackupSQLite(ctx, db, dest); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	info, err := os.Stat(dest)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(stdout, "backed up %s to %s (%d bytes)\n", db, dest, info.Size())
	return nil
}
