//go:build e2e

package tests

import (
	"os"
	"testing"
)

// TestMain stops what the chaos tests share across test functions (one dev
// server, one agentctl build) once every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	chaosTeardown()
	os.Exit(code)
}
