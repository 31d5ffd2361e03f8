// The SQLite file under the service's feet: a process that has the file open goes on reading and
// writing it after it is deleted, renamed or replaced, and whatever it writes then is gone at the
// next start. The guard notices, so that health fails and no such write is acknowledged.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"usersd/store"
)

// fileGuard remembers which files the store opened (the database and its write-ahead log) and
// tells when their paths no longer name them. Once lost, a file stays lost: the process cannot
// reopen the database under the running connections, so it answers unavailable until restarted.
type fileGuard struct {
	files []openedFile
	// onLost runs once, when a file is first found gone, before anything is answered about it.
	onLost func() error
	lose   sync.Once
	lost   atomic.Pointer[error] // set by lose
	// closed is set when the store closes, whose last connection deletes the write-ahead log as
	// SQLite always does: that is not a loss, and a closed store is not the file's fault.
	closed atomic.Bool
}

type openedFile struct {
	path string
	info os.FileInfo
}

// newFileGuard records the identity of each path, as it is now.
func newFileGuard(onLost func() error, paths ...string) (*fileGuard, error) {
	g := &fileGuard{onLost: onLost}
	for _, path := range paths {
		info, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("record the SQLite file: %w", err)
		}
		g.files = append(g.files, openedFile{path, info})
	}
	return g, nil
}

// check looks at the paths again (a stat each) and returns an error wrapping store.ErrUnavailable
// if a file is not the one opened. A nil guard (PostgreSQL, or SQLite in memory) has nothing to check.
func (g *fileGuard) check() error {
	if g == nil || g.closed.Load() {
		return nil
	}
	if err := g.lastFinding(); err != nil {
		return err
	}
	for _, f := range g.files {
		info, err := os.Stat(f.path)
		switch {
		case errors.Is(err, fs.ErrNotExist) || err == nil && !os.SameFile(info, f.info):
			g.lose.Do(func() {
				lost := fmt.Errorf("%w: %s is no longer the file this process opened (deleted, renamed or replaced); "+
					"restart the service to open what is there now", store.ErrUnavailable, f.path)
				if err := g.onLost(); err != nil {
					lost = fmt.Errorf("%w; and emptying the write-ahead log failed: %w", lost, err)
				}
				g.lost.Store(&lost)
			})
			return g.lastFinding()
		case err != nil:
			// Not a finding about the file (a folder made unreadable, say): this answer fails, the
			// next check looks again.
			return fmt.Errorf("%w: look at the SQLite file: %w", store.ErrUnavailable, err)
		}
	}
	return nil
}

// close ends the watch.
func (g *fileGuard) close() {
	if g != nil {
		g.closed.Store(true)
	}
}

// lastFinding returns what an earlier check found, without looking at the files again.
func (g *fileGuard) lastFinding() error {
	if g == nil {
		return nil
	}
	if lost := g.lost.Load(); lost != nil {
		return *lost
	}
	return nil
}

// emptyLog copies the write-ahead log into the database file that the writer has open and empties
// the log. Once the file is lost this is what keeps the rest safe: a log left beside a file that
// replaced ours would be replayed into that file at the next start; a renamed file gets all its
// writes, and so would be whole if renamed back; and if the log itself was deleted, its writes
// reach the file that is still at the path. It does not wait for a stop, which a crash would skip.
func emptyLog(writer *sql.DB) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var busy, logFrames, checkpointed int
	if err := writer.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &checkpointed); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if busy != 0 {
		return fmt.Errorf("checkpoint: readers held %d of %d frames of the log", logFrames-checkpointed, logFrames)
	}
	return nil
}
