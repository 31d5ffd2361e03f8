// A real PgBouncer for tests: Debian's, started by the test in transaction mode (its default, and
// what most deployments run) in front of the test PostgreSQL, with a database of each test's own.
package storetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// PgBouncer is a PgBouncer process that a test started and stops when it ends.
type PgBouncer struct {
	postgres string // the test server's URL
	addr     string // where the pooler listens
}

// Admin runs command (PAUSE, RESUME, SHOW POOLS, ...) on the pooler's admin console, as the test
// server's user, whom the pooler makes its admin, and fails the test if it is refused. PAUSE
// returns once every transaction that holds a server connection has ended; the queries sent after
// it wait in the pooler until RESUME.
func (b *PgBouncer) Admin(t testing.TB, command string) {
	t.Helper()
	u, err := url.Parse(b.postgres)
	if err != nil {
		t.Fatal(err)
	}
	u.Host, u.Path = b.addr, "/pgbouncer"
	console := OpenPostgres(t, WithURLParam(t, u.String(), "default_query_exec_mode", "simple_protocol")) // the console takes no other
	defer console.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := console.ExecContext(ctx, command); err != nil {
		t.Fatalf("pgbouncer %s: %v", command, err)
	}
}

// pgbouncerPaths are where Debian's package puts the binary, before PATH is searched.
var pgbouncerPaths = []string{"/usr/sbin/pgbouncer"}

// StartPgBouncer starts a PgBouncer in transaction mode in front of the test PostgreSQL (see
// PostgresURL), for the test alone. Without the pgbouncer binary (USERS_TEST_PGBOUNCER, Debian's
// path, or PATH) the test is skipped, saying how to run it, unless USERS_REQUIRE_PGBOUNCER=1, which
// makes it fail instead (CI sets it).
func StartPgBouncer(t testing.TB) *PgBouncer {
	t.Helper()
	return StartPgBouncerFor(t, PostgresURL(t))
}

// StartPgBouncerFor starts a PgBouncer in transaction mode in front of the server that base names
// (a Cluster's primary, say), as StartPgBouncer does.
func StartPgBouncerFor(t testing.TB, base string) *PgBouncer {
	t.Helper()
	return StartPgBouncerWith(t, base)
}

// StartPgBouncerWith starts a PgBouncer as StartPgBouncerFor does, with settings (lines of its
// [pgbouncer] section, which win over the test's own) added. When base has a password, clients log
// in with it (SCRAM), and the pooler logs in to the server with it.
func StartPgBouncerWith(t testing.TB, base string, settings ...string) *PgBouncer {
	t.Helper()
	binary := findPgBouncer()
	if binary == "" {
		skipUnlessRequired(t, "USERS_REQUIRE_PGBOUNCER", "no pgbouncer binary: install Debian's pgbouncer "+
			"(apt-get install pgbouncer) or set USERS_TEST_PGBOUNCER to one")
	}
	server, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	// PgBouncer refuses to run as root: as root it runs as the postgres user, who must be able to
	// read its folder (a test's own temporary folder is readable by its owner alone).
	var asUser []string
	dir, err := os.MkdirTemp("", "usersd-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			t.Fatalf("pgbouncer will not run as root, and there is no postgres user to run it as: %v", err)
		}
		asUser = []string{"-u", "postgres"}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	password, hasPassword := server.User.Password()
	authType := "trust"
	if hasPassword {
		authType = "scram-sha-256"
	}
	config := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = %s
auth_file = %s
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
ignore_startup_parameters = extra_float_digits
admin_users = %s
idle_transaction_timeout = 5
tcp_keepalive = 1
tcp_keepidle = 5
tcp_keepintvl = 2
tcp_keepcnt = 3
logfile =
pidfile =
%s
`, server.Hostname(), portOf(server), port, authType, filepath.Join(dir, "users.txt"), server.User.Username(), strings.Join(settings, "\n"))
	files := map[string]string{"pgbouncer.ini": config, "users.txt": fmt.Sprintf("%q %q\n", server.User.Username(), password)}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(binary, append(asUser, filepath.Join(dir, "pgbouncer.ini"))...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() { // what the pooler said, in case it went away under the test
			t.Logf("pgbouncer on port %d said:\n%s", port, out.String())
		}
	})
	b := &PgBouncer{postgres: base, addr: fmt.Sprintf("127.0.0.1:%d", port)}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err == nil {
			c.Close()
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer did not listen on %s within 10 s: %v\n%s", b.addr, err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pooled returns dsn, a URL of the server behind the pooler, with the pooler's address instead.
func (b *PgBouncer) Pooled(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = b.addr
	return u.String()
}

// Database creates a database for the test alone and returns its URL through the pooler and its
// URL on the server itself, the one for the migrations and LISTEN. (A schema of the test's own
// would not do: PgBouncer refuses the search_path startup parameter that selects it.) The database
// is dropped when the test ends, with whatever connections the pooler still holds to it.
func (b *PgBouncer) Database(t testing.TB) (pooled, direct string) {
	t.Helper()
	name := "usersd_test_" + strings.ToLower(rand.Text()[:12])
	admin := OpenPostgres(t, b.postgres)
	if _, err := admin.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, `DROP DATABASE `+name+` WITH (FORCE)`); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(b.postgres)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	direct = u.String()
	u.Host = b.addr
	return u.String(), direct
}

func findPgBouncer() string {
	if path := os.Getenv("USERS_TEST_PGBOUNCER"); path != "" {
		return path
	}
	for _, path := range pgbouncerPaths {
		if _, err := os.Stat(path); err == nil {
			return path
		}
	}
	path, _ := exec.LookPath("pgbouncer")
	return path
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return "5432"
}
