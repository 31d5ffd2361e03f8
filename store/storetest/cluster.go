// A real PostgreSQL cluster for tests, on this machine: a primary, a synchronous standby and an
// asynchronous standby, each a server of its own on a port of its own, built by the test from
// Debian's PostgreSQL binaries with initdb and pg_basebackup -R, and stopped when the test ends.
// The test owns it, so it may pause a standby's replay, or kill the primary and promote a standby.
package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Cluster is a primary with two streaming standbys: Sync, named in the primary's
// synchronous_standby_names so that a commit returns only once it holds the commit too, and Async.
type Cluster struct {
	Primary, Sync, Async *Server
}

// Server is one PostgreSQL server of a Cluster.
type Server struct {
	Name string // "primary", "sync" or "async"; a standby's application_name
	Port int
	dir  string
	run  func(name string, args ...string) *exec.Cmd
}

// clusterDatabase is the database that a Cluster's URLs name.
const clusterDatabase = "usersd"

// URL returns the server's URL for the cluster's database.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, clusterDatabase)
}

// Hostport is the server's address, as a multi-host URL lists it.
func (s *Server) Hostport() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// StartCluster builds and starts a Cluster for the test alone. Without PostgreSQL's server binaries
// (pg_ctl and its siblings, from Debian's postgresql package; USERS_TEST_PG_BIN names their folder)
// the test is skipped, saying how to run it, unless USERS_REQUIRE_POSTGRES=1, which makes it fail.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := findPostgresBin()
	if bin == "" {
		skipUnlessRequired(t, "USERS_REQUIRE_POSTGRES", "no PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup): "+
			"install Debian's postgresql package or set USERS_TEST_PG_BIN to their folder")
	}
	root, err := os.MkdirTemp("", "usersd-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	run := runAsServerOwner(t, bin, root)

	c := &Cluster{
		Primary: &Server{Name: "primary", Port: freePort(t), dir: filepath.Join(root, "primary"), run: run},
		Sync:    &Server{Name: "sync", Port: freePort(t), dir: filepath.Join(root, "sync"), run: run},
		Async:   &Server{Name: "async", Port: freePort(t), dir: filepath.Join(root, "async"), run: run},
	}
	p := c.Primary
	mustRun(t, run("initdb", "-D", p.dir, "-U", "postgres", "--auth=trust", "--no-sync", "--encoding=UTF8", "--locale=C.UTF-8"))
	// The settings that docs/POSTGRESQL.md#settings-on-postgresql gives a primary.
	appendConfig(t, p.dir, "postgresql.conf", p.Port, root,
		"wal_level = replica",
		"max_wal_senders = 10",
		"synchronous_commit = on",
		"hot_standby_feedback = on",
		"wal_keep_size = '256MB'",
	)
	p.start(t)
	t.Cleanup(func() { p.stop() })
	admin := OpenPostgres(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.Port))
	if _, err := admin.Exec(`CREATE DATABASE ` + clusterDatabase); err != nil {
		t.Fatalf("create database %s: %v", clusterDatabase, err)
	}
	for _, sb := range []*Server{c.Sync, c.Async} {
		mustRun(t, run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", "postgres",
			"-D", sb.dir, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync"))
		// -R wrote primary_conninfo; a later line wins, and names the standby as the primary's
		// synchronous_standby_names knows it.
		appendConfig(t, sb.dir, "postgresql.auto.conf", sb.Port, root,
			fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=%s'", p.Port, sb.Name),
			"hot_standby = on",
			"hot_standby_feedback = on",
		)
		sb.start(t)
		t.Cleanup(func() { sb.stop() })
	}
	// Only now, with the sync standby streaming: before, every commit would wait for it.
	if _, err := admin.Exec(`ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (sync)'`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(`SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	c.waitStreaming(t)
	return c
}

// waitStreaming waits until the primary sees both standbys stream, the sync one as synchronous.
func (c *Cluster) waitStreaming(t testing.TB) {
	t.Helper()
	db := OpenPostgres(t, c.Primary.URL())
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := db.QueryRow(`SELECT count(*) FROM pg_stat_replication
			WHERE state = 'streaming' AND (application_name = 'async' OR sync_state = 'sync')`).Scan(&n)
		if err == nil && n == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standbys did not stream within 30 s (%d of 2, %v)", n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PauseReplay stops the standby applying what it receives (pg_wal_replay_pause), until
// ResumeReplay: it goes on answering, with ever older data.
func (s *Server) PauseReplay(t testing.TB) { s.exec(t, `SELECT pg_wal_replay_pause()`) }

// ResumeReplay lets a paused standby catch up.
func (s *Server) ResumeReplay(t testing.TB) { s.exec(t, `SELECT pg_wal_replay_resume()`) }

// Kill ends the server with SIGKILL, as a crash of its machine would: nothing is flushed or said
// to its clients.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	pid := s.pid(t)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s (pid %d): %v", s.Name, pid, err)
	}
	// Its backends notice that their postmaster is gone and exit; until they have, the port may
	// still take connections that go nowhere.
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// Promote makes a standby the primary (pg_ctl promote), and returns when it accepts writes.
func (s *Server) Promote(t testing.TB) {
	t.Helper()
	mustRun(t, s.run("pg_ctl", "promote", "-w", "-t", "30", "-D", s.dir))
}

// Stop stops the server at once (pg_ctl stop -m immediate).
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if err := s.stop(); err != nil {
		t.Fatalf("stop %s: %v", s.Name, err)
	}
}

// Start starts a stopped server again.
func (s *Server) Start(t testing.TB) { s.start(t) }

// start starts the server. Its port was free when it was chosen, but another test may have taken
// it since: then the server starts again on another.
func (s *Server) start(t testing.TB) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		cmd := s.run("pg_ctl", "start", "-w", "-t", "60", "-D", s.dir, "-l", filepath.Join(s.dir, "server.log"))
		out, err := cmd.CombinedOutput()
		if err == nil {
			return
		}
		if attempt == 3 || !strings.Contains(s.Log(), "could not bind") {
			t.Fatalf("%s: %v\n%s\n%s", strings.Join(cmd.Args, " "), err, out, s.Log())
		}
		s.Port = freePort(t)
		appendConfig(t, s.dir, "postgresql.auto.conf", s.Port, filepath.Dir(s.dir))
	}
}

func (s *Server) stop() error {
	if _, err := os.Stat(filepath.Join(s.dir, "postmaster.pid")); err != nil {
		return nil // not running
	}
	out, err := s.run("pg_ctl", "stop", "-m", "immediate", "-w", "-D", s.dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// Log returns what the server has logged, for a test that fails.
func (s *Server) Log() string {
	out, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	return string(out)
}

func (s *Server) pid(t testing.TB) int {
	t.Helper()
	pid, err := postmasterPID(s.dir)
	if err != nil {
		t.Fatalf("%s is not running: %v", s.Name, err)
	}
	return pid
}

// postmasterPID is the pid that a data folder's postmaster.pid names: the server's, while it runs.
func postmasterPID(dataDir string) (int, error) {
	out, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]))
	if err != nil {
		return 0, fmt.Errorf("read %s/postmaster.pid: %w", dataDir, err)
	}
	return pid, nil
}

func (s *Server) exec(t testing.TB, statement string) {
	t.Helper()
	db, err := sql.Open("pgx", s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, statement); err != nil {
		t.Fatalf("%s on %s: %v", statement, s.Name, err)
	}
}

// appendConfig adds lines to a server's configuration file, after the port and socket folder of
// the server, which listens on loopback only.
func appendConfig(t testing.TB, dir, file string, port int, socketDir string, lines ...string) {
	t.Helper()
	all := append([]string{
		fmt.Sprintf("port = %d", port),
		"listen_addresses = '127.0.0.1'",
		fmt.Sprintf("unix_socket_directories = '%s'", socketDir),
		"fsync = on", // the durability that a failover test counts on
	}, lines...)
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("\n" + strings.Join(all, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
}

// runAsServerOwner returns how to run a PostgreSQL binary from bin: as this user, or, when this is
// root (which PostgreSQL refuses to run as), as the postgres user, who is then given root.
func runAsServerOwner(t testing.TB, bin, root string) func(name string, args ...string) *exec.Cmd {
	t.Helper()
	var credential *syscall.Credential
	if os.Geteuid() == 0 {
		owner, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("PostgreSQL will not run as root, and there is no postgres user to run it as: %v", err)
		}
		uid, _ := strconv.Atoi(owner.Uid)
		gid, _ := strconv.Atoi(owner.Gid)
		if err := os.Chown(root, uid, gid); err != nil {
			t.Fatal(err)
		}
		credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = root
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credential}
		return cmd
	}
}

func mustRun(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}

// findPostgresBin returns the folder of PostgreSQL's server binaries: USERS_TEST_PG_BIN, or the
// newest of Debian's /usr/lib/postgresql/*/bin, or "" if there is none.
func findPostgresBin() string {
	if dir := os.Getenv("USERS_TEST_PG_BIN"); dir != "" {
		return dir
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "pg_ctl")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

// CPU returns the processor time that the server has used so far: its postmaster's and that of
// every process it runs (backends, WAL senders, the checkpointer), from /proc. Processes that
// ended in between are not counted, so measure across a stretch in which the pools keep their
// connections.
func (s *Server) CPU(t testing.TB) time.Duration {
	t.Helper()
	postmaster := s.pid(t)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	const ticksPerSecond = 100 // USER_HZ, which /proc counts in on Linux
	var ticks int64
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // ended since the listing
		}
		// The command may hold spaces and parentheses: the fields start after its last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 13 {
			continue
		}
		parent, _ := strconv.Atoi(fields[1])
		if pid != postmaster && parent != postmaster {
			continue
		}
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		ticks += utime + stime
	}
	return time.Duration(ticks) * time.Second / ticksPerSecond
}
