package deploy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider/catalog"
)

// requireTool returns the path of a Debian tool, skipping loudly when it
// is absent, unless SCOOTGATE_REQUIRE_DAEMONS=1 (CI, where
// scripts/ci-tools.sh installs it), where absence fails.
func requireTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := name + " is not installed (Debian package " + pkg + "; scripts/ci-tools.sh installs it)"
	if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
		t.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but " + msg)
	}
	t.Skip("SKIPPING: " + msg)
	return ""
}

// TestAlertRules: the alert rules load (promtool check rules) and their
// unit tests pass (promtool test rules): each alert fires on the series
// it is meant for, at the time it should, and not on healthy ones.
func TestAlertRules(t *testing.T) {
	promtool := requireTool(t, "promtool", "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out.String())
		}
	}
}

// TestDashboard: the Grafana dashboard is JSON that Grafana imports: a
// title and uid, unique panel ids, every query on the datasource
// variable. (internal/app TestDeployQueriesExist checks that every
// metric it queries exists.)
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile("grafana/scootgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title, UID string
		Panels     []struct {
			ID         int
			Type       string
			Title      string
			Datasource *struct{ UID string }
			Targets    []struct{ Expr string }
		}
		Templating struct {
			List []struct{ Name, Type string }
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	if d.Title == "" || d.UID == "" {
		t.Error("dashboard without title or uid")
	}
	hasDS := false
	for _, v := range d.Templating.List {
		hasDS = hasDS || (v.Name == "datasource" && v.Type == "datasource")
	}
	if !hasDS {
		t.Error("no datasource variable: the dashboard would be bound to one Prometheus")
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("panel %q: id %d missing or repeated", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q is not on the datasource variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if q.Expr == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
			queries++
		}
	}
	if queries < 20 {
		t.Errorf("only %d queries", queries)
	}
}

// TestSystemdSecurity: systemd-analyze rates the unit's exposure 3.0 or
// lower ("OK"), offline, on the file itself.
func TestSystemdSecurity(t *testing.T) {
	analyze := requireTool(t, "systemd-analyze", "systemd")
	cmd := exec.Command(analyze, "security", "--offline=true", "--threshold=30", "scootgate.service")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	overall := ""
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "Overall exposure level") {
			overall = line
		}
	}
	if err != nil || overall == "" {
		t.Fatalf("systemd-analyze security: %v (exposure above 3.0?)\n%s", err, out.String())
	}
	t.Log(strings.TrimSpace(overall))
}

// TestSysusers: the sysusers.d file creates the service user and group
// the unit runs as (in a scratch root, not on this machine).
func TestSysusers(t *testing.T) {
	sysusers := requireTool(t, "systemd-sysusers", "systemd")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf, err := filepath.Abs("sysusers.d/scootgate.conf")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sysusers, "--root="+root, conf).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	group, err := os.ReadFile(filepath.Join(root, "etc/group"))
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile("scootgate.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"User=scootgate", "Group=scootgate", "StateDirectory=scootgate"} {
		if !strings.Contains(string(unit), "\n"+want+"\n") {
			t.Errorf("scootgate.service lacks %s", want)
		}
	}
	if !strings.HasPrefix(string(passwd), "scootgate:x:") || !strings.Contains(string(passwd), ":/var/lib/scootgate:/usr/sbin/nologin") {
		t.Errorf("passwd: %q", passwd)
	}
	if !strings.HasPrefix(string(group), "scootgate:x:") {
		t.Errorf("group: %q", group)
	}
}

// TestDockerignore: the build context of the Containerfile keeps what
// the Go build needs and leaves out the git history, built binaries and
// local state.
func TestDockerignore(t *testing.T) {
	data, err := os.ReadFile("Containerfile.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			rules[strings.TrimSuffix(line, "/")] = true
		}
	}
	for _, out := range []string{".git", "bin", "*.db"} {
		if !rules[out] {
			t.Errorf("%s is not ignored", out)
		}
	}
	for _, in := range []string{"go.mod", "go.sum", "cmd", "internal", "pkg"} {
		if rules[in] || rules["!"+in] {
			t.Errorf("%s is needed by the build but ignored", in)
		}
	}
}

// TestDashboardProtocols: the dashboard's protocol variable has one value
// per provider API, each matching exactly that API's endpoints (the
// endpoint label of the request metrics), so a new endpoint cannot be
// missing from it.
func TestDashboardProtocols(t *testing.T) {
	data, err := os.ReadFile("grafana/scootgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Templating struct {
			List []struct {
				Name    string
				Query   json.RawMessage // a string for a custom variable
				Options []struct{ Text, Value string }
			}
		}
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range d.Templating.List {
		if v.Name != "protocol" {
			continue
		}
		for _, o := range v.Options {
			if o.Value != "$__all" {
				got[o.Text] = sortedAlternatives(o.Value)
			}
		}
		var query string
		if err := json.Unmarshal(v.Query, &query); err != nil {
			t.Fatalf("protocol variable query: %v", err)
		}
		for _, part := range strings.Split(query, ", ") {
			name, value, _ := strings.Cut(part, " : ")
			if got[name] != sortedAlternatives(value) {
				t.Errorf("protocol %s: query says %q, options %q", name, value, got[name])
			}
		}
	}
	want := map[string]string{}
	for _, a := range catalog.APIs() {
		var names []string
		for _, s := range a.Endpoints {
			names = append(names, s.Endpoint.String())
		}
		want[a.Protocol.String()] = sortedAlternatives(strings.Join(names, "|"))
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("protocol variable (-dashboard +catalog):\n%s", diff)
	}
}

// sortedAlternatives returns the alternatives of the regular expression
// a|b|c, sorted: the order of a match-any list does not matter.
func sortedAlternatives(re string) string {
	parts := strings.Split(re, "|")
	slices.Sort(parts)
	return strings.Join(parts, "|")
}
