// A real Patroni cluster for tests, on this machine: one etcd, three Patroni nodes that each run a
// PostgreSQL server, and HAProxy in front of whichever is the primary, from Debian's patroni,
// etcd-server and haproxy packages. Its configuration is the one a deployment document gives for
// hosts db-1.internal to db-3.internal, moved onto loopback ports: the test runs what the
// documentation tells operators to run, not a configuration of its own.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// PatroniConfig is a deployment's documented configuration, written for three nodes named db-1 to
// db-3 at db-N.internal (PostgreSQL on 5432, Patroni's REST API on 8008), etcd at
// etcd-N.internal:2379, and CHANGE-ME for every password.
type PatroniConfig struct {
	Node    string // db-1's patroni.yml; the others differ only in their name and addresses
	HAProxy string // haproxy.cfg, whose listener "primary" binds *:5000
}

// Patroni is a cluster that a test started and stops when it ends.
type Patroni struct {
	Nodes    []*PatroniNode
	HAProxy  string // host:port of HAProxy's listener, which leads to the primary
	Password string // what replaced CHANGE-ME: every role's password
	// SocketDir holds the servers' Unix sockets (the test's folder, not the system's).
	SocketDir string
	root      string
}

// PatroniNode is one Patroni process and the PostgreSQL server it keeps.
type PatroniNode struct {
	Name           string // db-1, db-2 or db-3
	Port, RESTPort int
	config         string // its patroni.yml
	dataDir        string
	cmd            *exec.Cmd
}

// StartPatroni starts a Patroni cluster of three nodes as config describes, for the test alone, and
// returns once db-1 leads, with a synchronous standby and a replica streaming from it, and HAProxy
// leads to it. Without Debian's patroni, etcd and haproxy (or PostgreSQL's server binaries) the
// test is skipped, saying how to run it, unless USERS_REQUIRE_PATRONI=1, which makes it fail.
func StartPatroni(t testing.TB, config PatroniConfig) *Patroni {
	t.Helper()
	bin := findPostgresBin()
	tools := map[string]string{}
	for _, name := range []string{"patroni", "patronictl", "etcd", "haproxy"} {
		path, err := exec.LookPath(name)
		if err != nil {
			for _, dir := range []string{"/usr/bin", "/usr/sbin"} {
				if _, statErr := os.Stat(filepath.Join(dir, name)); statErr == nil {
					path, err = filepath.Join(dir, name), nil
				}
			}
		}
		if err != nil || bin == "" {
			skipUnlessRequired(t, "USERS_REQUIRE_PATRONI", "no "+name+" or PostgreSQL server binaries: install Debian's patroni, "+
				"etcd-server, haproxy and postgresql (apt-get install patroni etcd-server haproxy postgresql)")
		}
		tools[name] = path
	}
	root, err := os.MkdirTemp("", "usersd-patroni-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"db-1", "db-2", "db-3", "etcd", "haproxy"} {
				out, _ := os.ReadFile(filepath.Join(root, name+".log"))
				t.Logf("%s said (last 6000 bytes):\n%s", name, tail(string(out), 6000))
			}
		}
	})
	run := runAsServerOwner(t, bin, root) // gives root to the postgres user when this is root
	p := &Patroni{Password: "pw-" + strings.ToLower(rand.Text()[:16]), SocketDir: root, root: root}

	etcdArgs, etcdAddr := etcdFlags(t, root)
	startDaemon(t, root, "etcd", exec.Command(tools["etcd"], etcdArgs...))
	waitFor(t, 30*time.Second, "etcd answers", func() error { return httpOK("http://" + etcdAddr + "/health") })

	for i := 1; i <= 3; i++ {
		n := &PatroniNode{Name: fmt.Sprintf("db-%d", i), Port: freePort(t), RESTPort: freePort(t)}
		n.dataDir = filepath.Join(root, n.Name)
		n.config = filepath.Join(root, n.Name+".yml")
		yml := p.nodeConfig(t, config.Node, n, i, etcdAddr, bin)
		if err := os.WriteFile(n.config, []byte(yml), 0o644); err != nil {
			t.Fatal(err)
		}
		p.Nodes = append(p.Nodes, n)
	}
	for _, n := range p.Nodes {
		cmd := run("patroni", n.config) // as PostgreSQL's owner, which patroni runs the server as
		cmd.Path = tools["patroni"]     // not in PostgreSQL's folder
		// Its password file goes in the test's folder, not in a home that may not be the postgres user's.
		cmd.Env = append(os.Environ(), "PATRONI_POSTGRESQL_PGPASS="+filepath.Join(root, n.Name+".pgpass"))
		n.cmd = cmd
		logTo(t, cmd, filepath.Join(root, n.Name+".log"))
		cmd.SysProcAttr.Setpgid = true
		if err := cmd.Start(); err != nil {
			t.Fatalf("start patroni %s: %v", n.Name, err)
		}
		t.Cleanup(func() { n.stop(t) })
		if n.Name == "db-1" { // the others join it once it leads, as replicas
			waitFor(t, 90*time.Second, "db-1 leads", func() error { return httpOK(n.rest("/primary")) })
		}
	}
	p.WaitHealthy(t, 120*time.Second)

	haproxy := filepath.Join(root, "haproxy.cfg")
	p.HAProxy = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	if err := os.WriteFile(haproxy, []byte(p.haproxyConfig(t, config.HAProxy)), 0o644); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, root, "haproxy", exec.Command(tools["haproxy"], "-db", "-f", haproxy))
	// HAProxy counts a server as up until its checks have failed (fall 2): only once a run of new
	// connections has met the primary alone does it lead nowhere else.
	waitFor(t, 60*time.Second, "HAProxy leads to the primary alone", func() error {
		for range 10 {
			if err := isPrimary(p.SuperuserURL(p.HAProxy, "postgres")); err != nil {
				return err
			}
			time.Sleep(200 * time.Millisecond)
		}
		return nil
	})
	return p
}

// nodeConfig is config's patroni.yml made for node n: its name, its loopback ports, its folder, a
// socket folder of the test's own, the one etcd, and the cluster's password.
func (p *Patroni) nodeConfig(t testing.TB, config string, n *PatroniNode, i int, etcd, bin string) string {
	t.Helper()
	yml := config
	replace := func(old, new string) {
		if !strings.Contains(yml, old) {
			t.Fatalf("the documented patroni.yml has no %q, which the test replaces:\n%s", old, config)
		}
		yml = strings.ReplaceAll(yml, old, new)
	}
	replace("name: db-1", "name: "+n.Name)
	replace("0.0.0.0:8008", fmt.Sprintf("127.0.0.1:%d", n.RESTPort))
	replace("db-1.internal:8008", fmt.Sprintf("127.0.0.1:%d", n.RESTPort))
	replace("0.0.0.0:5432", fmt.Sprintf("127.0.0.1:%d", n.Port))
	replace("db-1.internal:5432", fmt.Sprintf("127.0.0.1:%d", n.Port))
	replace("etcd-1.internal:2379,etcd-2.internal:2379,etcd-3.internal:2379", etcd)
	replace("10.0.0.0/8", "127.0.0.1/32")
	replace("/var/lib/postgresql/15/usersd", n.dataDir)
	replace("/usr/lib/postgresql/15/bin", bin)
	replace("CHANGE-ME", p.Password)
	// The servers' sockets go in the test's folder, not the system's.
	replace("\npostgresql:\n", fmt.Sprintf("\npostgresql:\n  parameters: {unix_socket_directories: '%s'}\n", p.root))
	return yml
}

// haproxyConfig is config's haproxy.cfg made for the cluster's loopback ports.
func (p *Patroni) haproxyConfig(t testing.TB, config string) string {
	t.Helper()
	cfg := config
	replace := func(old, new string) {
		if !strings.Contains(cfg, old) {
			t.Fatalf("the documented haproxy.cfg has no %q, which the test replaces:\n%s", old, config)
		}
		cfg = strings.ReplaceAll(cfg, old, new)
	}
	replace("bind *:5000", "bind "+p.HAProxy)
	for i, n := range p.Nodes {
		replace(fmt.Sprintf("db-%d.internal:5432 check port 8008", i+1), fmt.Sprintf("127.0.0.1:%d check port %d", n.Port, n.RESTPort))
	}
	return cfg
}

// SuperuserURL is the URL of database on hostport as the cluster's superuser.
func (p *Patroni) SuperuserURL(hostport, database string) string {
	return fmt.Sprintf("postgres://postgres:%s@%s/%s?sslmode=disable", p.Password, hostport, database)
}

// Hostport is the node's PostgreSQL address.
func (n *PatroniNode) Hostport() string { return fmt.Sprintf("127.0.0.1:%d", n.Port) }

func (n *PatroniNode) rest(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", n.RESTPort, path)
}

// PatroniMember is one node as Patroni's GET /cluster describes it.
type PatroniMember struct {
	Name, Role, State string
	Lag               any `json:"lag"` // a number of bytes, or "unknown"
}

// Members asks the first node that answers for the cluster's members.
func (p *Patroni) Members(t testing.TB) []PatroniMember {
	t.Helper()
	var last error
	for _, n := range p.Nodes {
		var cluster struct{ Members []PatroniMember }
		if last = getJSON(n.rest("/cluster"), &cluster); last == nil {
			return cluster.Members
		}
	}
	t.Fatalf("no Patroni node answers GET /cluster: %v", last)
	return nil
}

// WaitHealthy waits until a leader runs with a synchronous standby and a replica that both stream.
func (p *Patroni) WaitHealthy(t testing.TB, within time.Duration) {
	t.Helper()
	waitFor(t, within, "a leader, a synchronous standby and a replica, all streaming", func() error {
		roles := map[string]int{}
		for _, m := range p.Members(t) {
			if m.State == "running" || m.State == "streaming" {
				roles[m.Role]++
			}
		}
		if roles["leader"] != 1 || roles["sync_standby"] != 1 || roles["replica"] != 1 {
			return fmt.Errorf("members by role: %v", roles)
		}
		return nil
	})
}

// Node returns the node that has role (leader, sync_standby, replica) now.
func (p *Patroni) Node(t testing.TB, role string) *PatroniNode {
	t.Helper()
	for _, m := range p.Members(t) {
		if m.Role == role {
			for _, n := range p.Nodes {
				if n.Name == m.Name {
					return n
				}
			}
		}
	}
	t.Fatalf("no member is %s: %v", role, p.Members(t))
	return nil
}

// Switchover asks Patroni, through patronictl as an operator would, to hand the lead to candidate.
func (p *Patroni) Switchover(t testing.TB, candidate *PatroniNode) {
	t.Helper()
	leader := p.Node(t, "leader")
	cmd := exec.Command("patronictl", "-c", leader.config, "switchover", "--leader", leader.Name, "--candidate", candidate.Name, "--force")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}

// KillPostmaster ends the node's PostgreSQL server with SIGKILL, as a crash would; its Patroni
// stays, and starts it again.
func (n *PatroniNode) KillPostmaster(t testing.TB) {
	t.Helper()
	pid := n.postmaster(t)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the postmaster of %s (pid %d): %v", n.Name, pid, err)
	}
}

// postmaster is the pid of the node's running PostgreSQL server.
func (n *PatroniNode) postmaster(t testing.TB) int {
	t.Helper()
	pid, err := postmasterPID(n.dataDir)
	if err != nil {
		t.Fatalf("%s runs no server: %v", n.Name, err)
	}
	return pid
}

// stop asks Patroni to stop (it stops its server first), and kills what is left after 30 s.
func (n *PatroniNode) stop(t testing.TB) {
	if n.cmd.Process == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Logf("patroni %s did not stop within 30 s: killed", n.Name)
	}
	syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	// Its server, if it outlived it (it runs in a session of its own: see Kill), and if the pid
	// file left by a killed one does not name another process by now.
	if pid, err := postmasterPID(n.dataDir); err == nil {
		if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(cmdline), n.dataDir) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// isPrimary connects to dsn afresh and tells whether a primary answered.
func isPrimary(dsn string) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var standby bool
	if err := db.QueryRowContext(ctx, `SELECT pg_is_in_recovery()`).Scan(&standby); err != nil {
		return err
	}
	if standby {
		return fmt.Errorf("a standby answered")
	}
	return nil
}

// startDaemon starts a helper process (etcd, HAProxy) that runs until the test ends, logging to
// root/name.log.
func startDaemon(t testing.TB, root, name string, cmd *exec.Cmd) {
	t.Helper()
	logTo(t, cmd, filepath.Join(root, name+".log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
}

// etcdFlags are a one-member etcd's flags, its data in root, and the address it serves clients on.
func etcdFlags(t testing.TB, root string) (flags []string, client string) {
	client = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	return []string{"--name", "etcd-1", "--data-dir", filepath.Join(root, "etcd"),
		"--listen-client-urls", "http://" + client, "--advertise-client-urls", "http://" + client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "etcd-1=" + peer}, client
}

func logTo(t testing.TB, cmd *exec.Cmd, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.Stdout, cmd.Stderr = f, f
}

func waitFor(t testing.TB, within time.Duration, what string, ready func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := ready()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %v", within, what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var patroniClient = &http.Client{Timeout: 3 * time.Second}

func httpOK(url string) error {
	res, err := patroniClient.Get(url)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return nil
}

func getJSON(url string, into any) error {
	res, err := patroniClient.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(into)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// Kill ends the node as the loss of its machine would: its Patroni and its PostgreSQL server get
// SIGKILL, so that its leader key in etcd stays until it expires. (Patroni starts the server in a
// session of its own, so that it survives a restart of Patroni: it is killed by its own pid.)
func (n *PatroniNode) Kill(t testing.TB) {
	t.Helper()
	postmaster := n.postmaster(t)
	if err := syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill patroni %s: %v", n.Name, err)
	}
	syscall.Kill(postmaster, syscall.SIGKILL)
}
