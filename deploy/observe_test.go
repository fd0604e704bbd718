package deploy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
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
