// Settings: every one has a flag and an environment variable; a flag wins over the variable.
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"usersd/handlers"
)

type config struct {
	addr          string
	db            string
	apiKeysFile   string
	maxBodyBytes  int64
	shutdownGrace time.Duration
}

// parseConfig reads the flags in args, each defaulting to its environment variable and then to the
// built-in default.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("usersd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	env := func(name, fallback string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return fallback
	}
	maxBody, err := strconv.ParseInt(env("USERS_MAX_BODY_BYTES", strconv.Itoa(handlers.DefaultMaxBodyBytes)), 10, 64)
	if err != nil {
		return config{}, fmt.Errorf("USERS_MAX_BODY_BYTES: %w", err)
	}
	grace, err := time.ParseDuration(env("USERS_SHUTDOWN_GRACE", "10s"))
	if err != nil {
		return config{}, fmt.Errorf("USERS_SHUTDOWN_GRACE: %w", err)
	}
	fs.StringVar(&cfg.addr, "addr", env("USERS_ADDR", ":8080"), "TCP address to listen on (env USERS_ADDR)")
	fs.StringVar(&cfg.db, "db", env("USERS_DB", "data/users.db"), "SQLite file path or :memory: (env USERS_DB)")
	fs.StringVar(&cfg.apiKeysFile, "api-keys-file", env("USERS_API_KEYS_FILE", ""),
		"file with one API key a line; blank lines and lines starting with # are ignored (env USERS_API_KEYS_FILE)")
	fs.Int64Var(&cfg.maxBodyBytes, "max-body-bytes", maxBody, "largest request body accepted, REST and RPC (env USERS_MAX_BODY_BYTES)")
	fs.DurationVar(&cfg.shutdownGrace, "shutdown-grace", grace, "how long requests under way may take to finish on SIGTERM (env USERS_SHUTDOWN_GRACE)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.maxBodyBytes <= 0 {
		return config{}, fmt.Errorf("max body bytes must be positive, got %d", cfg.maxBodyBytes)
	}
	return cfg, nil
}

// loadAPIKeys gathers the keys of USERS_API_KEYS (comma-separated) and of the keys file. There is
// never an unauthenticated write path: with no key configured, it makes one and logs it once. Keys
// are not put on the command line, where every user of the machine could read them.
func loadAPIKeys(cfg config, getenv func(string) string, logger *slog.Logger) (*handlers.APIKeys, error) {
	var keys []string
	for key := range strings.SplitSeq(getenv("USERS_API_KEYS"), ",") {
		if key = strings.TrimSpace(key); key != "" {
			keys = append(keys, key)
		}
	}
	if cfg.apiKeysFile != "" {
		fromFile, err := readKeysFile(cfg.apiKeysFile)
		if err != nil {
			return nil, err
		}
		keys = append(keys, fromFile...)
	}
	if len(keys) == 0 {
		var b [24]byte
		rand.Read(b[:])
		key := base64.RawURLEncoding.EncodeToString(b[:])
		logger.Warn("no API keys configured (USERS_API_KEYS or -api-keys-file): generated one for this run; writes need it in the x-api-key header",
			"api_key", key)
		keys = append(keys, key)
	}
	return handlers.NewAPIKeys(keys...), nil
}

// readKeysFile reads one key a line; blank lines and lines starting with # are ignored.
func readKeysFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("API keys file: %w", err)
	}
	defer f.Close()
	var keys []string
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		line := strings.TrimSpace(lines.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	if err := lines.Err(); err != nil {
		return nil, fmt.Errorf("API keys file %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("API keys file %s holds no key", path)
	}
	return keys, nil
}
