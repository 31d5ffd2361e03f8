package sqlstore_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"usersd/store"
	"usersd/store/sqlstore"
)

// TestABackupIsWrittenWhereNoOtherUserCanReachIt watches the destination's folder with inotify
// while a backup runs: the only file that appears there is the finished copy under its own name.
// Anything else the backup creates there must be a folder (the private one, mode 0700), since a
// partial copy created in the shared folder, even under a random name, is one that another local
// user could read, or race a file or a symlink into between its name being chosen and its creation.
func TestABackupIsWrittenWhereNoOtherUserCanReachIt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(t.TempDir(), "users.db") // elsewhere, so that only the backup's entries are seen
	s := open(t, path)
	defer s.Close()
	if _, err := s.CreateUser(t.Context(), store.NewUser{Name: "ada"}, nil); err != nil {
		t.Fatal(err)
	}

	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "copy.db")
	if err := sqlstore.BackupSQLite(context.Background(), path, dest); err != nil {
		t.Fatal(err)
	}

	var folders int
	for _, e := range inotifyEvents(t, fd) {
		switch {
		case e.name == filepath.Base(dest) && e.mask&unix.IN_ISDIR == 0:
		case e.mask&unix.IN_ISDIR != 0:
			folders++
		default:
			t.Errorf("the backup created the file %q in the destination's folder, where others may reach it", e.name)
		}
	}
	if folders != 1 {
		t.Errorf("the backup created %d folders beside the copy, want its one private folder", folders)
	}
}

type inotifyEvent struct {
	mask uint32
	name string
}

// inotifyEvents reads the events queued on fd, which must not block.
func inotifyEvents(t *testing.T, fd int) []inotifyEvent {
	t.Helper()
	var events []inotifyEvent
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			return events
		}
		if err != nil {
			t.Fatal(err)
		}
		for offset := 0; offset+unix.SizeofInotifyEvent <= n; {
			raw := (*unix.InotifyEvent)(unsafe.Pointer(&buf[offset]))
			name := buf[offset+unix.SizeofInotifyEvent : offset+unix.SizeofInotifyEvent+int(raw.Len)]
			events = append(events, inotifyEvent{mask: raw.Mask, name: string(bytes.TrimRight(name, "\x00"))})
			offset += unix.SizeofInotifyEvent + int(raw.Len)
		}
	}
}
