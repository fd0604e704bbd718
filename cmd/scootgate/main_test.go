package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func runCmd(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestDigest(t *testing.T) {
	// sha256("sk-scootgate-demo"), computed independently with sha256sum.
	const want = "8f795dabd83cfe9c78cd5a884fe62ea0bf4547f8a7428c803b1cea310a6c929f"
	for _, in := range []string{"sk-scootgate-demo", "sk-scootgate-demo\n", "sk-scootgate-demo\r\n"} {
		code, out, _ := runCmd(t, in, "digest")
		if code != 0 || strings.TrimSpace(out) != want {
			t.Errorf("digest(%q) = %d %q", in, code, out)
		}
	}
	if code, _, errOut := runCmd(t, "", "digest"); code == 0 || !strings.Contains(errOut, "no key") {
		t.Errorf("empty stdin: code %d stderr %q", code, errOut)
	}
}

func TestCheckListsEveryProblem(t *testing.T) {
	code, _, errOut := runCmd(t, "", "check", "--config", filepath.Join("..", "..", "testdata", "config", "invalid", "unknown-key.toml"))
	if code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if !strings.Contains(errOut, "problem(s)") {
		t.Fatalf("stderr %q does not list problems", errOut)
	}
}

// TestRunPprofFlag: --pprof-listen refuses an address that is not
// loopback before anything starts, unless --pprof-allow-remote.
func TestRunPprofFlag(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.toml")
	code, _, errOut := runCmd(t, "", "run", "--config", missing, "--pprof-listen", "0.0.0.0:6060")
	if code != 2 || !strings.Contains(errOut, "not a loopback address") {
		t.Errorf("non-loopback --pprof-listen: code %d, stderr %q; want 2 and the reason", code, errOut)
	}
	// Allowed, it gets as far as the config (which does not exist).
	code, _, errOut = runCmd(t, "", "run", "--config", missing, "--pprof-listen", "0.0.0.0:6060", "--pprof-allow-remote")
	if code != 1 || !strings.Contains(errOut, "missing.toml") {
		t.Errorf("with --pprof-allow-remote: code %d, stderr %q; want 1 and the config error", code, errOut)
	}
}

func TestUsage(t *testing.T) {
	if code, _, _ := runCmd(t, ""); code != 2 {
		t.Errorf("no args: code %d, want 2", code)
	}
	if code, _, errOut := runCmd(t, "", "bogus"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Errorf("bogus: code %d %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "", "run"); code != 2 || !strings.Contains(errOut, "--config is required") {
		t.Errorf("run without config: code %d %q", code, errOut)
	}
	if code, out, _ := runCmd(t, "", "version"); code != 0 || !strings.HasPrefix(out, "scootgate ") {
		t.Errorf("version: %d %q", code, out)
	}
}
