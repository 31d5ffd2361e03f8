package proctest

import (
	"os"
	"strings"
	"testing"
)

// MissingTool ends a test that needs a program the machine does not have: it skips, with message
// saying how to get it, unless the switch require (a USERS_REQUIRE_* variable) is 1, as CI sets
// it, which makes the test fail instead, so that CI never passes without running it.
func MissingTool(t testing.TB, require, message string) {
	t.Helper()
	if !strings.HasPrefix(require, "USERS_REQUIRE_") {
		t.Fatalf("MissingTool: %q is not a USERS_REQUIRE_* switch, so CI could not force the test", require)
	}
	message += "; set " + require + "=1 to fail instead of skip"
	if os.Getenv(require) == "1" {
		t.Fatal(message)
	}
	t.Skip(message) // USERS_REQUIRE_* (require) set to 1, as CI does, fails above instead
}
