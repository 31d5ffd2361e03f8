// usersd key: makes a new API key, for a keys file that holds only digests.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"usersd/auth"
)

// runKey makes a new random key and prints it once, then the keys file line that holds its digest,
// name and scopes: the file then holds no secret, and the key is known only to whoever ran this.
func runKey(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("usersd key", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.String("name", "", "the key's name, which logs, traces and the change log record (default: after its digest)")
	scopes := fs.String("scopes", "users.read,users.write", "the key's scopes, comma-separated")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stdout, "Usage: usersd key [-name NAME] [-scopes users.read,users.write]\n\nPrints a new API key once, then the line to add to the keys file (-api-keys-file).\n\nFlags:")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil
	} else if err != nil {
		return fmt.Errorf("usersd key: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("usersd key: unexpected arguments %q", fs.Args())
	}
	secret := newSecretKey()
	line := secret
	if *name != "" {
		line += " name=" + *name
	}
	line += " scopes=" + *scopes
	key, err := auth.ParseAPIKey(line)
	if err != nil {
		return fmt.Errorf("usersd key: %w", err)
	}
	fmt.Fprintf(stdout, "key:  %s\nline: %s\n", secret, key.Line())
	return nil
}
