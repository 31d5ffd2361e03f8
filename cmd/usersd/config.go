// Settings: every one has a flag and an environment variable; a flag wins over the variable.
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"usersd/handlers"
	"usersd/store/sqlstore"
	"usersd/users"
)

type config struct {
	addr string
	db   string
	// dbDirect is a URL of -db's database that bypasses the pooler -db goes through; "" when -db
	// is direct itself (sqlstore.WithDirect).
	dbDirect string
	// dbRead are the URLs of read standbys, and dbReadMaxLag how far behind the primary one may be
	// to serve a read that sends no Consistency-Token (sqlstore.WithReadStandbys).
	dbRead       []string
	dbReadMaxLag time.Duration
	// dbWait is how long start-up waits for a database that does not answer (starting.go).
	dbWait       time.Duration
	apiKeysFile  string
	maxBodyBytes int64
	// answerMemory bounds the bytes of answers held for clients that have not yet taken them.
	answerMemory  int64
	shutdownGrace time.Duration
	// maxWatchers and watchHeartbeat shape the watches of users (handlers.Config).
	maxWatchers int64
	// watchersPerAddress and watchersPerConnection share the watches out; 0 caps nothing.
	watchersPerAddress, watchersPerConnection int64
	watchHeartbeat                            time.Duration
	// drainDelay is how long health checks say NOT_SERVING before the server stops accepting, so
	// that load balancers have stopped sending new requests by then.
	drainDelay  time.Duration
	corsOrigins []string
	limits      serverLimits
	// trustRequestID takes a client's X-Request-Id as the request's id; see handlers.Config.
	trustRequestID bool
	// adminAddr is the admin listener's address (/metrics and Go's profiler); empty means none.
	adminAddr string
	// showVersion asks for the version instead of serving.
	showVersion bool
	// logLevel is the least level logged: DEBUG adds the access lines of probes, WARN and ERROR
	// leave out every access line.
	logLevel slog.Level
}

// serverLimits are the http.Server's protections against slow and greedy clients.
type serverLimits struct {
	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	writeTimeout      time.Duration
	idleTimeout       time.Duration
	maxHeaderBytes    int64
	requestTimeout    time.Duration // the deadline of each request's work, store queries included
	http2MaxStreams   int64         // concurrent streams per HTTP/2 connection
	http2MaxFrameSize int64         // largest HTTP/2 frame the server reads
	// http2WriteByteTimeout closes an HTTP/2 connection that has had something to send and sent
	// nothing for this long: a client that stops reading would otherwise hold its streams'
	// goroutines and buffers for as long as it stays connected, since WriteTimeout only ends
	// streams and cannot interrupt the connection's blocked writer.
	http2WriteByteTimeout time.Duration
	// http2PingTimeout is how long a connection may send nothing before the server pings it, and
	// how long the ping may go unanswered before the connection is closed: it finds peers that
	// vanished without closing.
	http2PingTimeout time.Duration
}

// settings declares flags whose defaults come from environment variables, and collects the errors
// of variables that do not parse.
type settings struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []error
}

func (s *settings) env(name, fallback string) string {
	if v := s.getenv(name); v != "" {
		return v
	}
	return fallback
}

func (s *settings) string(p *string, flagName, envName, fallback, usage string) {
	s.fs.StringVar(p, flagName, s.env(envName, fallback), usage+" (env "+envName+")")
}

func (s *settings) int64(p *int64, flagName, envName string, fallback int64, usage string) {
	v, err := strconv.ParseInt(s.env(envName, strconv.FormatInt(fallback, 10)), 10, 64)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s: %w", envName, err))
	}
	s.fs.Int64Var(p, flagName, v, usage+" (env "+envName+")")
}

func (s *settings) bool(p *bool, flagName, envName string, fallback bool, usage string) {
	v, err := strconv.ParseBool(s.env(envName, strconv.FormatBool(fallback)))
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s: %w", envName, err))
	}
	s.fs.BoolVar(p, flagName, v, usage+" (env "+envName+")")
}

func (s *settings) duration(p *time.Duration, flagName, envName string, fallback time.Duration, usage string) {
	v, err := time.ParseDuration(s.env(envName, fallback.String()))
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s: %w", envName, err))
	}
	s.fs.DurationVar(p, flagName, v, usage+" (env "+envName+")")
}

// description is the first line of the help.
const description = "usersd serves a users resource over gRPC, gRPC-Web, Connect and REST, on one port."

// errHelpShown is parseConfig's answer to -h: the help is printed, and the program exits 0.
var errHelpShown = errors.New("help shown")

// parseConfig reads the flags in args, each defaulting to its environment variable and then to the
// built-in default. -h (or -help) prints the help to help and returns errHelpShown; any other
// mistake is one error, without the help around it.
func parseConfig(args []string, getenv func(string) string, help io.Writer) (config, error) {
	s := &settings{fs: flag.NewFlagSet("usersd", flag.ContinueOnError), getenv: getenv}
	s.fs.SetOutput(io.Discard) // the flag package's own messages: the error is returned instead
	s.fs.Usage = func() {}
	var cfg config
	var corsOrigins, dbRead string
	l := &cfg.limits
	s.string(&cfg.addr, "addr", "USERS_ADDR", ":8080", "TCP address to listen on")
	s.string(&cfg.db, "db", "USERS_DB", "data/users.db", "SQLite file path, :memory:, or a postgres:// URL")
	s.string(&cfg.dbDirect, "db-direct", "USERS_DB_DIRECT", "", "with -db through a pooler in transaction mode (PgBouncer): a postgres:// URL of the same database that bypasses it, for the migrations and LISTEN")
	s.string(&dbRead, "db-read", "USERS_DB_READ", "", "postgres:// URLs of streaming standbys of -db that may serve reads, separated by spaces")
	s.duration(&cfg.dbReadMaxLag, "db-read-max-lag", "USERS_DB_READ_MAX_LAG", time.Second, "how far behind the primary a standby may be to serve a read that sends no Consistency-Token")
	s.duration(&cfg.dbWait, "db-wait", "USERS_DB_WAIT", 5*time.Minute, "how long start-up waits for a PostgreSQL that does not answer, serving /livez (200) and /readyz (503) meanwhile, before it gives up")
	s.string(&cfg.apiKeysFile, "api-keys-file", "USERS_API_KEYS_FILE", "", "file with one API key a line; blank lines and lines starting with # are ignored")
	s.string(&corsOrigins, "cors-origins", "USERS_CORS_ORIGINS", "", "comma-separated origins that browsers may call from (\"*\" for any); none means same origin only")
	s.int64(&cfg.maxBodyBytes, "max-body-bytes", "USERS_MAX_BODY_BYTES", handlers.DefaultMaxBodyBytes, "largest request body accepted, REST and RPC")
	s.int64(&cfg.answerMemory, "answer-memory", "USERS_ANSWER_MEMORY", handlers.DefaultAnswerMemory, "bytes of answers held at once for clients that have not yet taken them; a read whose answer does not fit is refused with 503 / UNAVAILABLE")
	s.duration(&cfg.shutdownGrace, "shutdown-grace", "USERS_SHUTDOWN_GRACE", 10*time.Second, "how long requests under way may take to finish on SIGTERM")
	s.duration(&cfg.drainDelay, "drain-delay", "USERS_DRAIN_DELAY", 0, "how long health checks say NOT_SERVING before the server stops accepting on SIGTERM")
	s.duration(&l.readHeaderTimeout, "read-header-timeout", "USERS_READ_HEADER_TIMEOUT", 5*time.Second, "time a client has to send a request's headers")
	s.duration(&l.readTimeout, "read-timeout", "USERS_READ_TIMEOUT", 30*time.Second, "time a client has to send a whole request")
	s.duration(&l.writeTimeout, "write-timeout", "USERS_WRITE_TIMEOUT", 30*time.Second, "time from a request's headers to the end of its answer")
	s.duration(&l.idleTimeout, "idle-timeout", "USERS_IDLE_TIMEOUT", 2*time.Minute, "how long an idle keep-alive connection stays open")
	s.int64(&l.maxHeaderBytes, "max-header-bytes", "USERS_MAX_HEADER_BYTES", 64<<10, "largest request header block")
	s.duration(&l.requestTimeout, "request-timeout", "USERS_REQUEST_TIMEOUT", 10*time.Second, "deadline of each request's work, store queries included")
	s.int64(&l.http2MaxStreams, "http2-max-streams", "USERS_HTTP2_MAX_STREAMS", 250, "concurrent streams per HTTP/2 connection")
	s.int64(&l.http2MaxFrameSize, "http2-max-frame-size", "USERS_HTTP2_MAX_FRAME_SIZE", 1<<20, "largest HTTP/2 frame read, 16384 to 16777215")
	s.duration(&l.http2WriteByteTimeout, "http2-write-byte-timeout", "USERS_HTTP2_WRITE_BYTE_TIMEOUT", 10*time.Second, "how long an HTTP/2 connection may take no bytes of an answer before it is closed")
	s.duration(&l.http2PingTimeout, "http2-ping-timeout", "USERS_HTTP2_PING_TIMEOUT", 30*time.Second, "silence on an HTTP/2 connection after which it is pinged, and the wait for the answer")
	s.bool(&cfg.trustRequestID, "trust-request-id", "USERS_TRUST_REQUEST_ID", false, "take X-Request-Id as the request's id: only behind a proxy that sets it on every request")
	s.string(&cfg.adminAddr, "admin-addr", "USERS_ADMIN_ADDR", "", "address of the admin listener: Prometheus metrics (/metrics) and Go's profiler (/debug/pprof/); keep it off the public network; empty means off")
	s.int64(&cfg.maxWatchers, "max-watchers", "USERS_MAX_WATCHERS", users.DefaultMaxWatchers, "watches of users (WatchUsers, GET /users/events) open at once; more are refused with RESOURCE_EXHAUSTED / 429")
	s.int64(&cfg.watchersPerAddress, "max-watchers-per-address", "USERS_MAX_WATCHERS_PER_ADDRESS", handlers.DefaultWatchersPerAddress, "watches open at once from one client address (0: no cap; behind a proxy every client has its address); more are refused with RESOURCE_EXHAUSTED / 429")
	s.int64(&cfg.watchersPerConnection, "max-watchers-per-connection", "USERS_MAX_WATCHERS_PER_CONNECTION", handlers.DefaultWatchersPerConnection, "watches open at once on one connection (0: no cap)")
	s.duration(&cfg.watchHeartbeat, "watch-heartbeat", "USERS_WATCH_HEARTBEAT", users.DefaultWatchHeartbeat, "longest silence of a watch: a heartbeat is sent after it; keep it under the idle timeout of every proxy on the way")
	var debugAddr string
	s.string(&debugAddr, "debug-addr", "USERS_DEBUG_ADDR", "", "the former name of -admin-addr, which it now means")
	s.fs.BoolVar(&cfg.showVersion, "version", false, "print the version, commit and Go version, and exit")
	var logLevel string
	s.string(&logLevel, "log-level", "USERS_LOG_LEVEL", "info", "least level logged: debug (adds the access lines of health checks and probes), info (every other request), warn or error (no access lines)")
	if len(s.errs) > 0 {
		return config{}, errors.Join(s.errs...)
	}
	if err := s.fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		printHelp(help, s.fs)
		return config{}, errHelpShown
	} else if err != nil {
		return config{}, fmt.Errorf("%w (usersd -h lists the settings)", err)
	}
	if cfg.showVersion {
		return cfg, nil
	}
	if s.fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", s.fs.Args())
	}
	switch {
	case debugAddr == "" || debugAddr == cfg.adminAddr:
	case cfg.adminAddr == "":
		cfg.adminAddr = debugAddr // the profiler's old flag keeps working, on the listener that replaced it
	default:
		return config{}, fmt.Errorf("-debug-addr %q and -admin-addr %q: -debug-addr is the former name of -admin-addr; give one", debugAddr, cfg.adminAddr)
	}
	if err := cfg.logLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return config{}, fmt.Errorf("-log-level takes debug, info, warn or error, got %q", logLevel)
	}
	if err := sqlstore.CheckDSN(cfg.db); err != nil {
		return config{}, fmt.Errorf("-db: %w", err)
	}
	// Spaces, not commas: one URL may name several hosts, separated by commas.
	cfg.dbRead = strings.Fields(dbRead)
	for origin := range strings.SplitSeq(corsOrigins, ",") {
		if origin = strings.TrimSpace(origin); origin != "" {
			cfg.corsOrigins = append(cfg.corsOrigins, origin)
		}
	}
	return cfg, cfg.check()
}

// printHelp prints the description, the ways to run the program, and every setting with its
// variable and default.
func printHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, `%s

Usage:
  usersd [flags]        serve (see the README for a walk through)
  usersd version        print the version, commit and Go version, and exit
  usersd backup FILE    write a consistent copy of the SQLite database -db names to FILE, while it serves

Every flag may be set by the environment variable named beside it; a flag wins over its variable.

Flags:
`, description)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprint(w, `
Environment only:
  USERS_API_KEYS
    	API keys that may write, comma-separated, each at least 16 characters; with
    	-api-keys-file, keys from both are valid. Keys never come from a flag, which
    	every user of the machine could read. With no key at all, one is made for the
    	run and logged once.
`)
}

// check rejects settings that cannot work.
func (cfg config) check() error {
	l := cfg.limits
	var errs []error
	for _, c := range []struct {
		name  string
		value int64
	}{{"max-body-bytes", cfg.maxBodyBytes}, {"max-header-bytes", l.maxHeaderBytes}, {"http2-max-streams", l.http2MaxStreams}, {"max-watchers", cfg.maxWatchers},
		{"answer-memory", cfg.answerMemory}} {
		if c.value <= 0 {
			errs = append(errs, fmt.Errorf("-%s must be positive, got %d", c.name, c.value))
		}
	}
	for _, c := range []struct {
		name  string
		value time.Duration
	}{
		{"shutdown-grace", cfg.shutdownGrace}, {"read-header-timeout", l.readHeaderTimeout}, {"read-timeout", l.readTimeout},
		{"write-timeout", l.writeTimeout}, {"idle-timeout", l.idleTimeout}, {"request-timeout", l.requestTimeout},
		{"http2-write-byte-timeout", l.http2WriteByteTimeout}, {"http2-ping-timeout", l.http2PingTimeout},
		{"watch-heartbeat", cfg.watchHeartbeat}, {"db-read-max-lag", cfg.dbReadMaxLag}, {"db-wait", cfg.dbWait},
	} {
		if c.value <= 0 {
			errs = append(errs, fmt.Errorf("-%s must be positive, got %s", c.name, c.value))
		}
	}
	for _, url := range cfg.dbRead {
		if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
			errs = append(errs, fmt.Errorf("-db-read takes postgres:// URLs separated by spaces, got %q", redactDSN(url)))
		}
	}
	if len(cfg.dbRead) > 0 && !strings.HasPrefix(cfg.db, "postgres://") && !strings.HasPrefix(cfg.db, "postgresql://") {
		errs = append(errs, errors.New("-db-read names standbys of a PostgreSQL primary: -db must be a postgres:// URL"))
	}
	if cfg.watchersPerAddress < 0 || cfg.watchersPerConnection < 0 {
		errs = append(errs, fmt.Errorf("-max-watchers-per-address and -max-watchers-per-connection must not be negative, got %d and %d",
			cfg.watchersPerAddress, cfg.watchersPerConnection))
	}
	if cfg.drainDelay < 0 {
		errs = append(errs, fmt.Errorf("-drain-delay must not be negative, got %s", cfg.drainDelay))
	}
	if l.http2MaxFrameSize < 16<<10 || l.http2MaxFrameSize > 1<<24-1 {
		errs = append(errs, fmt.Errorf("-http2-max-frame-size must be from 16384 to 16777215 (RFC 9113), got %d", l.http2MaxFrameSize))
	}
	return errors.Join(errs...)
}

// loadAPIKeys gathers the keys of USERS_API_KEYS (comma-separated) and of the keys file. There is
// never an unauthenticated write path: with no key configured, it makes one, which the caller logs once. Keys
// are not put on the command line, where every user of the machine could read them.
func loadAPIKeys(cfg config, getenv func(string) string) (_ *handlers.APIKeys, generated string, err error) {
	var keys []string
	fromEnv := getenv("USERS_API_KEYS")
	for key := range strings.SplitSeq(fromEnv, ",") {
		if key = strings.TrimSpace(key); key != "" {
			keys = append(keys, key)
		}
	}
	if fromEnv != "" && len(keys) == 0 {
		return nil, "", errors.New("USERS_API_KEYS is set but holds no key; unset it to have a key made for the run")
	}
	for i, key := range keys {
		if len(key) < minAPIKeyLength {
			return nil, "", fmt.Errorf("USERS_API_KEYS: key %d of %d has %d characters; a key needs at least %d", i+1, len(keys), len(key), minAPIKeyLength)
		}
	}
	if cfg.apiKeysFile != "" {
		fromFile, err := readKeysFile(cfg.apiKeysFile)
		if err != nil {
			return nil, "", err
		}
		keys = append(keys, fromFile...)
	}
	if len(keys) == 0 {
		var b [24]byte
		rand.Read(b[:])
		generated = base64.RawURLEncoding.EncodeToString(b[:])
		keys = append(keys, generated)
	}
	return handlers.NewAPIKeys(keys...), generated, nil
}

// minAPIKeyLength is the shortest key accepted: a key is a password that scripts send, and one a
// person could guess or type from memory is too short. Generate one with
// `openssl rand -base64 24`.
const minAPIKeyLength = 16

// readKeysFile reads one key a line; blank lines and lines starting with # are ignored.
func readKeysFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("API keys file: %w", err)
	}
	defer f.Close()
	var keys []string
	lines := bufio.NewScanner(f)
	for n := 1; lines.Scan(); n++ {
		line := strings.TrimSpace(lines.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(line) < minAPIKeyLength {
			return nil, fmt.Errorf("API keys file %s, line %d: the key has %d characters; a key needs at least %d", path, n, len(line), minAPIKeyLength)
		}
		keys = append(keys, line)
	}
	if err := lines.Err(); err != nil {
		return nil, fmt.Errorf("API keys file %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("API keys file %s holds no key", path)
	}
	return keys, nil
}
