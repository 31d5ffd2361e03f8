package main

import (
	"os"
	"testing"
)

// missingTool ends a test that needs a program the machine does not have: it skips, with message
// saying how to get it, unless the environment variable require is 1, as CI sets it, which makes
// the test fail instead, so that CI never passes without running it.
func missingTool(t *testing.T, require, message string) {
	t.Helper()
	message += "; set " + require + "=1 to fail instead of skip"
	if os.Getenv(require) == "1" {
		t.Fatal(message)
	}
	t.Skip(message)
}
