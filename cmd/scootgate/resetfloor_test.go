package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/snapshot"
)

// TestResetFloor: a floor pushed to 2^63-1 locks a node out of every later
// document; reset-floor removes it with a WARN log line, and the next
// document of any version saves again.
func TestResetFloor(t *testing.T) {
	dir := t.TempDir()
	store, err := snapshot.OpenDiskStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	if err := store.Save("routes", []byte(`{"version":9223372036854775807}`), 1<<63-1, at); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	if code := run([]string{"reset-floor", "--kind", "routes", "--state-dir", dir}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, stderr.String())
	}
	var line struct {
		Level, Msg, Snapshot string
		Floor                uint64 `json:"removed_floor"`
		Fetched              string `json:"removed_fetched_at"`
	}
	if err := json.Unmarshal(stderr.Bytes(), &line); err != nil {
		t.Fatalf("stderr is not one JSON log line: %v\n%s", err, stderr.String())
	}
	if line.Level != "WARN" || line.Snapshot != "routes" || line.Floor != 1<<63-1 || line.Fetched != "2026-11-30T08:00:00Z" || !strings.Contains(line.Msg, "floor reset") {
		t.Errorf("log line = %+v", line)
	}
	if !strings.Contains(stdout.String(), "removed the persisted routes snapshot (version 9223372036854775807, fetched 2026-11-30T08:00:00Z)") {
		t.Errorf("stdout = %q", stdout.String())
	}
	if err := store.Save("routes", []byte(`{"version":7}`), 7, at); err != nil {
		t.Errorf("Save of version 7 after the reset: %v", err)
	}

	// Nothing to reset is not an error; the authz floor was never touched.
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"reset-floor", "--kind", "authz", "--state-dir", dir}, nil, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
		t.Errorf("reset of a missing authz floor: exit %d, stderr %q", code, stderr.String())
	}
}

func TestResetFloorUsage(t *testing.T) {
	for _, args := range [][]string{
		{"reset-floor"},
		{"reset-floor", "--kind", "routes"},
		{"reset-floor", "--kind", "keys", "--state-dir", "x"},
		{"reset-floor", "--kind", "routes", "--state-dir", "x", "--config", "y"},
		{"reset-floor", "--kind", "routes", "--state-dir", "x", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, nil, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "scootgate reset-floor: ") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a usage error", args, code, stderr.String())
		}
	}
}
