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
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"usersd/auth"
	"usersd/handlers"
	"usersd/store/sqlstore"
	"usersd/users"
)

type config struct {
	addr string
	// tlsCert and tlsKey are the PEM files of the certificate served over TLS on addr, read again
	// when they change (package certfile); both "" serve plain HTTP/1.1 and h2c.
	tlsCert, tlsKey string
	db              string
	// dbDirect is a URL of -db's database that bypasses the pooler -db goes through; "" when -db
	// is direct itself (sqlstore.WithDirect).
	dbDirect string
	// dbRead are the URLs of read standbys, and dbReadMaxLag how far behind the primary one may be
	// to serve a read that sends no Consistency-Token (sqlstore.WithReadStandbys).
	dbRead       []string
	dbReadMaxLag time.Duration
	// dbWait is how long start-up waits for a database that does not answer (starting.go).
	dbWait time.Duration
	// writeBatch is the most writes one commit carries (sqlstore.WithWriteBatch).
	writeBatch  int64
	apiKeysFile string
	// publicReads lets callers without a credential read users (handlers.Config.PrivateReads).
	publicReads bool
	// jwtIssuer and jwtAudience accept bearer tokens of an OpenID Connect issuer (auth.BearerConfig).
	jwtIssuer, jwtAudience string
	// rateLimit and rateBurst limit each caller's requests (handlers.Config.RateLimit).
	rateLimit    float64
	rateBurst    int64
	maxBodyBytes int64
	// answerMemory bounds the bytes of answers held for clients that have not yet taken them.
	answerMemory  int64
	shutdownGrace time.Duration
	// maxWatchers and watchHeartbeat shape the watches of users (handlers.Config).
	maxWatchers int64
	// watchersPerAddress and watchersPerConnection share the watches out; 0 caps nothing.
	watchersPerAddress, watchersPerConnection int64
	watchHeartbeat                            time.Duration
	// deletedRetention keeps deleted users restorable (handlers.Config.DeletedRetention).
	deletedRetention time.Duration
	// drainDelay is how long health checks say NOT_SERVING before the server stops accepting, so
	// that load balancers have stopped sending new requests by then.
	drainDelay  time.Duration
	corsOrigins []string
	limits      serverLimits
	// trustRequestID takes a client's X-Request-Id as the request's id; see handlers.Config.
	trustRequestID bool
	// adminAddr is the admin listener's address (/metrics and Go's profiler); empty means none.
	adminAddr string
	// webhooksAllowHTTP and webhooksAllowPrivate widen which receivers webhooks may be sent to
	// (webhooks.Policy); webhooksSource is the CloudEvents source of their events.
	webhooksAllowHTTP, webhooksAllowPrivate bool
	webhooksSource                          string
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

func (s *settings) float64(p *float64, flagName, envName string, fallback float64, usage string) {
	v, err := strconv.ParseFloat(s.env(envName, strconv.FormatFloat(fallback, 'g', -1, 64)), 64)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s: %w", envName, err))
	}
	s.fs.Float64Var(p, flagName, v, usage+" (env "+envName+")")
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
	s.string(&cfg.tlsCert, "tls-cert", "USERS_TLS_CERT", "", "PEM `file` of the TLS certificate (its chain after it) to serve HTTPS on -addr, HTTP/2 and HTTP/1.1 by ALPN; read again when it changes; empty serves plain HTTP/1.1 and h2c")
	s.string(&cfg.tlsKey, "tls-key", "USERS_TLS_KEY", "", "PEM `file` of the private key of -tls-cert")
	s.string(&cfg.db, "db", "USERS_DB", "data/users.db", "SQLite file path, :memory:, or a postgres:// URL")
	s.string(&cfg.dbDirect, "db-direct", "USERS_DB_DIRECT", "", "with -db through a pooler in transaction mode (PgBouncer): a postgres:// URL of the same database that bypasses it, for the migrations and LISTEN")
	s.string(&dbRead, "db-read", "USERS_DB_READ", "", "postgres:// URLs of streaming standbys of -db that may serve reads, separated by spaces")
	s.duration(&cfg.dbReadMaxLag, "db-read-max-lag", "USERS_DB_READ_MAX_LAG", time.Second, "how far behind the primary a standby may be to serve a read that sends no Consistency-Token")
	s.duration(&cfg.dbWait, "db-wait", "USERS_DB_WAIT", 5*time.Minute, "how long start-up waits for a PostgreSQL that does not answer, serving /livez (200) and /readyz (503) meanwhile, before it gives up")
	s.int64(&cfg.writeBatch, "write-batch", "USERS_WRITE_BATCH", sqlstore.DefaultWriteBatch, "most writes one commit carries, 1 to 64: writes that arrive while a commit is under way are committed together, each keeping its own outcome; 1 commits every write alone")
	s.string(&cfg.apiKeysFile, "api-keys-file", "USERS_API_KEYS_FILE", "", "`file` of API keys, one a line: <key> or sha256:<hex digest of the key>, then optionally name=<name> and scopes=users.read,users.write,webhooks.manage (all three if not given); blank lines and lines starting with # are ignored; make a key with usersd key")
	s.string(&cfg.jwtIssuer, "jwt-issuer", "USERS_JWT_ISSUER", "", "URL of an OpenID Connect issuer whose bearer tokens (Authorization: Bearer <JWT>) are accepted besides API keys; its discovery document names its keys; empty means API keys only")
	s.string(&cfg.jwtAudience, "jwt-audience", "USERS_JWT_AUDIENCE", "", "the audience (aud) a bearer token must be for: this service's client id or URL at the issuer; required with -jwt-issuer")
	s.float64(&cfg.rateLimit, "rate-limit", "USERS_RATE_LIMIT", 0, "requests a second each caller may make to the routes of users (a caller is its key's name, or its client address without one); 0 means no limit; the limit is each process's, so N replicas behind a balancer allow N times as much")
	s.int64(&cfg.rateBurst, "rate-burst", "USERS_RATE_BURST", 0, "requests a caller may make at once, above -rate-limit; 0 means twice the rate")
	s.bool(&cfg.publicReads, "public-reads", "USERS_PUBLIC_READS", true, "let callers without a credential read users (reads and watches); false makes every read need a credential with the users.read scope")
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
	s.duration(&cfg.deletedRetention, "deleted-retention", "USERS_DELETED_RETENTION", users.DefaultDeletedRetention, "how long a deleted user stays restorable (POST /users/{id}:undelete) before it and its posts are purged; 0 removes a deleted user at once")
	s.bool(&cfg.webhooksAllowHTTP, "webhooks-allow-http", "USERS_WEBHOOKS_ALLOW_HTTP", false, "let webhook subscriptions use http URLs on loopback hosts (for tests); otherwise only https")
	s.bool(&cfg.webhooksAllowPrivate, "webhooks-allow-private", "USERS_WEBHOOKS_ALLOW_PRIVATE", false, "let webhooks be sent to private, loopback, link-local and unique-local addresses; otherwise they are refused at creation and at each connection")
	s.string(&cfg.webhooksSource, "webhooks-source", "USERS_WEBHOOKS_SOURCE", "/usersd", "the CloudEvents source of every webhook event: a URI reference that names this deployment")
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
		return config{}, fmt.Errorf("unexpected arguments %q (usersd -h lists the settings and the commands)", s.fs.Args())
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
  usersd key [-name N] [-scopes S]
                        make a new API key: prints the key once, and the line of the keys file
  usersd backup FILE    write a consistent copy of the SQLite database -db names to FILE, while it serves
  usersd healthcheck [-addr A]
                        exit 0 when the server at A (default: USERS_ADDR, or :8080) is ready
                        (GET /readyz), 1 otherwise: for a container's HEALTHCHECK
  usersd help           print this help (as -h does)

Every flag may be set by the environment variable named beside it; a flag wins over its variable.

Flags:
`, description)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprint(w, `
Environment only:
  USERS_API_KEYS
    	API keys, comma-separated, each at least 16 characters and holding both scopes;
    	with -api-keys-file, keys from both are valid. Keys never come from a flag,
    	which every user of the machine could read. With no key at all, one is made for
    	the run and logged once.
`)
}

// check rejects settings that cannot work.
func (cfg config) check() error {
	l := cfg.limits
	var errs []error
	if (cfg.tlsCert == "") != (cfg.tlsKey == "") {
		errs = append(errs, errors.New("-tls-cert and -tls-key go together: give both, or neither for plain HTTP"))
	}
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
	if cfg.deletedRetention < 0 {
		errs = append(errs, fmt.Errorf("-deleted-retention must be 0 (remove at once) or positive, got %s", cfg.deletedRetention))
	}
	for _, url := range cfg.dbRead {
		if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
			errs = append(errs, fmt.Errorf("-db-read takes postgres:// URLs separated by spaces, got %q", redactDSN(url)))
		}
	}
	if len(cfg.dbRead) > 0 && !strings.HasPrefix(cfg.db, "postgres://") && !strings.HasPrefix(cfg.db, "postgresql://") {
		errs = append(errs, errors.New("-db-read names standbys of a PostgreSQL primary: -db must be a postgres:// URL"))
	}
	if cfg.writeBatch < 1 || cfg.writeBatch > sqlstore.DefaultWriteBatch {
		// Past 64, PostgreSQL's subtransactions overflow (see sqlstore.DefaultWriteBatch).
		errs = append(errs, fmt.Errorf("-write-batch must be 1 to %d, got %d", sqlstore.DefaultWriteBatch, cfg.writeBatch))
	}
	if cfg.watchersPerAddress < 0 || cfg.watchersPerConnection < 0 {
		errs = append(errs, fmt.Errorf("-max-watchers-per-address and -max-watchers-per-connection must not be negative, got %d and %d",
			cfg.watchersPerAddress, cfg.watchersPerConnection))
	}
	if cfg.rateLimit < 0 || math.IsNaN(cfg.rateLimit) || math.IsInf(cfg.rateLimit, 0) || cfg.rateBurst < 0 || cfg.rateBurst > 1_000_000 {
		errs = append(errs, fmt.Errorf("-rate-limit must be 0 (off) or a positive number of requests a second, and -rate-burst from 0 (twice the rate) to 1000000; got %g and %d",
			cfg.rateLimit, cfg.rateBurst))
	}
	if cfg.rateBurst > 0 && cfg.rateLimit == 0 {
		errs = append(errs, errors.New("-rate-burst is set but -rate-limit is 0 (off): set -rate-limit too"))
	}
	if cfg.jwtIssuer != "" || cfg.jwtAudience != "" {
		if err := (auth.BearerConfig{Issuer: cfg.jwtIssuer, Audience: cfg.jwtAudience}).Check(); err != nil {
			errs = append(errs, fmt.Errorf("-jwt-issuer and -jwt-audience: %w", err))
		}
	}
	if cfg.drainDelay < 0 {
		errs = append(errs, fmt.Errorf("-drain-delay must not be negative, got %s", cfg.drainDelay))
	}
	if l.http2MaxFrameSize < 16<<10 || l.http2MaxFrameSize > 1<<24-1 {
		errs = append(errs, fmt.Errorf("-http2-max-frame-size must be from 16384 to 16777215 (RFC 9113), got %d", l.http2MaxFrameSize))
	}
	return errors.Join(errs...)
}

// loadAPIKeys gathers the keys of USERS_API_KEYS (comma-separated; each holds both scopes) and of
// the keys file. USERS_API_KEYS set but holding no key is refused, empty included: a deployment
// whose secret did not arrive must not run with a key nobody has. Keys are not put on the command
// line, where every user of the machine could read them.
func loadAPIKeys(cfg config, lookupEnv func(string) (string, bool)) (*auth.APIKeys, error) {
	keys := &auth.APIKeys{}
	fromEnv, set := lookupEnv("USERS_API_KEYS")
	var envKeys []string
	for key := range strings.SplitSeq(fromEnv, ",") {
		if key = strings.TrimSpace(key); key != "" {
			envKeys = append(envKeys, key)
		}
	}
	if set && len(envKeys) == 0 {
		return nil, errors.New("USERS_API_KEYS is set but holds no key; unset it to have a key made for the run")
	}
	for i, key := range envKeys {
		if len(key) < auth.MinAPIKeyLength {
			return nil, fmt.Errorf("USERS_API_KEYS: key %d of %d has %d characters; a key needs at least %d", i+1, len(envKeys), len(key), auth.MinAPIKeyLength)
		}
		if err := keys.Add(auth.NewAPIKey(key)); err != nil {
			return nil, fmt.Errorf("USERS_API_KEYS: key %d of %d: %w", i+1, len(envKeys), err)
		}
	}
	if cfg.apiKeysFile != "" {
		if err := readKeysFile(cfg.apiKeysFile, keys); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// ensureAKey makes a key when none is configured, so that there is never an unauthenticated write
// path, and returns it for the caller to log once; it returns "" when keys has one already.
func ensureAKey(keys *auth.APIKeys) (generated string) {
	if keys.Len() > 0 {
		return ""
	}
	generated = newSecretKey()
	key := auth.NewAPIKey(generated)
	key.Name = "generated"
	keys.Add(key)
	return generated
}

// newSecretKey returns a new random key: 24 bytes from the system's generator, base64url.
func newSecretKey() string {
	var b [24]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// readKeysFile adds the keys of a keys file to keys: one a line (auth.ParseAPIKey); blank
// lines and lines starting with # are ignored.
func readKeysFile(path string, keys *auth.APIKeys) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("API keys file: %w", err)
	}
	defer f.Close()
	before := keys.Len()
	lines := bufio.NewScanner(f)
	for n := 1; lines.Scan(); n++ {
		line := strings.TrimSpace(lines.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := auth.ParseAPIKey(line)
		if err == nil {
			err = keys.Add(key)
		}
		if err != nil {
			return fmt.Errorf("API keys file %s, line %d: %w", path, n, err)
		}
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("API keys file %s: %w", path, err)
	}
	if keys.Len() == before {
		return fmt.Errorf("API keys file %s holds no key", path)
	}
	return nil
}
