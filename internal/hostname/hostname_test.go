package hostname

import (
	"errors"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestResolveConfiguredWins(t *testing.T) {
	got, err := Resolve("node-7")
	if err != nil || got != "node-7" {
		t.Fatalf("Resolve(node-7) = %q, %v", got, err)
	}
}

func TestResolveMachine(t *testing.T) {
	want, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Resolve("")
	if err != nil || got != want {
		t.Fatalf("Resolve(\"\") = %q, %v; want %q", got, err, want)
	}
}

func TestResolveFailures(t *testing.T) {
	defer func(f func() (string, error)) { osHostname = f }(osHostname)
	osHostname = func() (string, error) { return "", errors.New("uname failed") }
	if got, err := Resolve(""); err == nil {
		t.Errorf("Resolve with a failing os.Hostname = %q, want an error", got)
	}
	osHostname = func() (string, error) { return "", nil }
	if got, err := Resolve(""); err == nil {
		t.Errorf("Resolve with an empty os.Hostname = %q, want an error", got)
	}
}
