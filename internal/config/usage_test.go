package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRulesUsage(t *testing.T) {
	view := func(c *Config) any { return c.Usage }
	def := Defaults().Usage
	runRules(t, []ruleCase{
		{name: "absent: defaults", view: view, wantView: def},
		{
			name: "every key set",
			add: "[usage]\nenabled = false\noutbox_path = \"/var/lib/scootgate/outbox.db\"\nmax_events = 5000\n" +
				"max_bytes = 1048576\ncommit_interval = \"20ms\"\nopenai_include_usage = false\n" +
				"crash_window_events = 1000\ncrash_window = \"500ms\"\n",
			view: view,
			wantView: Usage{
				OutboxPath: "/var/lib/scootgate/outbox.db", MaxEvents: 5000, MaxBytes: 1 << 20,
				CommitInterval: 20 * time.Millisecond, CrashWindowEvents: 1000, CrashWindow: 500 * time.Millisecond,
			},
		},
		{
			name: "limits",
			add: "[usage]\nmax_events = 10000000\nmax_bytes = 17179869184\ncommit_interval = \"1s\"\n" +
				"crash_window_events = 1000000\ncrash_window = \"1m\"\n",
			view: view,
			wantView: Usage{
				Enabled: true, OutboxPath: def.OutboxPath, MaxEvents: 10_000_000, MaxBytes: 16 << 30,
				CommitInterval: time.Second, OpenAIIncludeUsage: true, CrashWindowEvents: 1_000_000, CrashWindow: time.Minute,
			},
		},
		{
			name: "out of range",
			add: "[usage]\nmax_events = 0\nmax_bytes = 1048575\ncommit_interval = \"999us\"\n" +
				"crash_window_events = 15\ncrash_window = \"99ms\"\n",
			want: []Problem{
				{"usage.max_events", "0 is out of range; expected 1..10000000"},
				{"usage.max_bytes", "1048575 is out of range; expected 1048576..17179869184"},
				{"usage.commit_interval", "999µs is too small; expected at least 1ms"},
				{"usage.crash_window_events", "15 is out of range; expected 16..1000000"},
				{"usage.crash_window", "99ms is too small; expected at least 100ms"},
			},
		},
		{
			name: "crash window within the commit interval",
			add:  "[usage]\ncommit_interval = \"500ms\"\ncrash_window = \"500ms\"\n",
			want: []Problem{
				{"usage.crash_window", "500ms is not longer than commit_interval (500ms)"},
			},
		},
		{
			name: "too large",
			add:  "[usage]\nmax_events = 10000001\ncommit_interval = \"2s\"\ncrash_window = \"61s\"\n",
			want: []Problem{
				{"usage.max_events", "10000001 is out of range; expected 1..10000000"},
				{"usage.commit_interval", "2s is too large; expected at most 1s"},
				{"usage.crash_window", "1m1s is too large; expected at most 1m0s"},
			},
		},
		{
			name: "wrong types and an unknown key",
			add:  "[usage]\nenabled = \"yes\"\nmax_bytes = \"256MiB\"\noutbox_path = \"\"\nmax_event = 1\n",
			want: []Problem{
				{"usage.enabled", "expected a boolean, got a string"},
				{"usage.outbox_path", `expected a file path, like "scootgate-outbox.db"`},
				{"usage.max_bytes", "expected an integer, got a string"},
				{"usage.max_event", "unknown key; expected one of: commit_interval, crash_window, crash_window_events, enabled, max_bytes, max_events, openai_include_usage, outbox_path, serve_without_outbox"},
			},
		},
		{
			name:  "not a table",
			edits: []string{nodeLine, nodeLine + "\nusage = 1"},
			want:  []Problem{{"usage", "expected a table, got an integer"}},
		},
	})
}

// TestLoadUsagePath: Load resolves the outbox path, given or default,
// against the config file's directory.
func TestLoadUsagePath(t *testing.T) {
	for _, tt := range []struct {
		name, add, want string
	}{
		{name: "default", want: "scootgate-outbox.db"},
		{name: "relative", add: "[usage]\noutbox_path = \"state/outbox.db\"\n", want: "state/outbox.db"},
		{name: "absolute", add: "[usage]\noutbox_path = \"/var/lib/sg/outbox.db\"\n", want: "/var/lib/sg/outbox.db"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("C1", "k1")
			dir := t.TempDir()
			path := filepath.Join(dir, "node.toml")
			if err := os.WriteFile(path, []byte(base+tt.add), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if !filepath.IsAbs(want) {
				want = filepath.Join(dir, want)
			}
			if diff := cmp.Diff(c.Usage.OutboxPath, want); diff != "" {
				t.Errorf("OutboxPath (-got +want):\n%s", diff)
			}
		})
	}
}

// TestExampleUsageIsDefault: the [usage] table of example.toml spells out
// the defaults.
func TestExampleUsageIsDefault(t *testing.T) {
	doc := string(readTestdata(t, "example.toml"))
	_, table, ok := strings.Cut(doc, "\n[usage]\n")
	if !ok {
		t.Fatal("example.toml has no [usage] table")
	}
	if i := strings.Index(table, "\n["); i >= 0 {
		table = table[:i+1]
	}
	c, err := Parse([]byte(base+"[usage]\n"+table), ruleEnv(), ruleFS())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c.Usage, Defaults().Usage); diff != "" {
		t.Errorf("example.toml [usage] differs from Defaults() (-example +defaults):\n%s", diff)
	}
}
