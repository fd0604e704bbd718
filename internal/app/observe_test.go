package app

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/devstack/broker"
	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/routesnap"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// requireTool returns the path of a Debian tool the test runs, skipping
// loudly when it is absent, unless SCOOTGATE_REQUIRE_DAEMONS=1 (CI, where
// .ci/run installs it), where absence fails.
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

// observedStack is a node with usage events on and delivered to an
// embedded MQTT broker, after one successful request and one refused
// one: every metric family the node has is in its exposition.
func observedStack(t *testing.T) (*stack, string) {
	t.Helper()
	b, err := broker.Start(broker.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	s := startStack(t, stackOptions{extraTOML: "[mqtt]\nbroker = \"tcp://" + b.Addr() + "\"\ntopic = \"test/usage\"\n"})
	if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	if r := s.do(http.MethodPost, "/v1/chat/completions", bearer("sk-canary-unknown"), chat); r.status != 401 {
		t.Fatalf("status %d", r.status)
	}
	return s, s.scrapeMetrics()
}

func (s *stack) scrapeMetrics() string {
	s.t.Helper()
	resp, err := http.Get(s.health + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		s.t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	return string(body)
}

// TestNodeMetrics: the node-level families are there from the start:
// build, readiness, the client limit, and the egress error series of the
// configured proxy at 0.
func TestNodeMetrics(t *testing.T) {
	_, text := observedStack(t)
	for _, want := range []string{
		`scootgate_build_info{goversion="go`,
		"scootgate_ready 1\n",
		"scootgate_draining 0\n",
		"scootgate_client_inflight 0\n",
		"scootgate_client_max_concurrent_requests ",
		"scootgate_client_refused_total 0\n",
		`scootgate_egress_errors_total{proxy="test-socks",stage="proxy_dial"} 0`,
		`scootgate_egress_errors_total{proxy="test-socks",stage="provider_tls"} 0`,
		"scootgate_mqtt_connected ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestPromtoolCheckMetrics runs Prometheus' own linter over a real
// node's exposition.
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool := requireTool(t, "promtool", "prometheus")
	_, text := observedStack(t)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
	if s := strings.TrimSpace(out.String()); s != "" {
		t.Errorf("promtool check metrics: %s", s)
	}
}

// TestPerModelMetrics: a request counts under its public model and the
// backend that answered, with the tokens the provider reported.
func TestPerModelMetrics(t *testing.T) {
	_, text := observedStack(t)
	for _, want := range []string{
		`scootgate_model_requests_total{backend="oa",class="2xx",model="` + openAIModel + `"} 1`,
		`scootgate_model_tokens_total{backend="oa",model="` + openAIModel + `",type="input"} `,
		`scootgate_model_ttfb_seconds_count{backend="oa",model="` + openAIModel + `"} 1`,
		`scootgate_model_request_bytes_total{backend="oa",model="` + openAIModel + `"} `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(text, `scootgate_model_tokens_total{backend="oa",model="`+openAIModel+`",type="input"} 0`) {
		t.Error("no input tokens counted")
	}
}

// TestPruneModelsAfterSwap: after a route swap, the per-model series of
// a (model, backend) pair the new table does not route are gone; the
// others stay.
func TestPruneModelsAfterSwap(t *testing.T) {
	n := &node{metrics: metrics.New(metrics.Options{NoRuntime: true})}
	var holder routes.Holder
	reg := upstream.NewRegistry(upstream.Options{})
	decode := n.pruneModelsAfter(routesDecoder(&holder, policyOf([]string{"api.example.com"}, "c"), reg), &holder)
	apply := func(version uint64, models ...string) {
		t.Helper()
		doc := routesnap.Snapshot{Schema: routesnap.Schema, Version: version, Backends: []routesnap.Backend{{
			ID: "a", Protocol: routesnap.ProtocolOpenAI, BaseURL: "https://api.example.com/v1", Credential: "c", MaxInflightPerNode: 8,
		}}}
		for _, m := range models {
			doc.Models = append(doc.Models, routesnap.Model{Name: m, Targets: []routesnap.Target{{Backend: "a", Model: "p", Weight: 1}}})
		}
		data, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		_, commit, err := decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if err := commit(); err != nil {
			t.Fatal(err)
		}
	}
	apply(1, "m1", "m2")
	for _, m := range []string{"m1", "m2"} {
		n.metrics.Record(&usageevent.Event{PublicModel: m, Backend: "a", HTTPStatus: 200, RequestBytes: 1})
	}
	apply(2, "m1")
	var out strings.Builder
	mfs, err := n.metrics.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "scootgate_model_request_bytes_total" {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "model" {
						out.WriteString(l.GetValue() + " ")
					}
				}
			}
		}
	}
	if got := out.String(); got != "m1 " {
		t.Errorf("models with series after the swap: %q, want m1 only", got)
	}
}

// TestDeployQueriesExist: every scootgate_* metric that the Grafana
// dashboard and the alert rules in deploy/ query is in a real node's
// exposition (a histogram's _bucket, _sum and _count by its family), so
// a renamed or removed metric fails here, not on an operator's screen.
func TestDeployQueriesExist(t *testing.T) {
	_, text := observedStack(t)
	// A node with a minted-token credential has the families only such
	// credentials bring.
	text += startStack(t, stackOptions{vertex: true}).scrapeMetrics()
	families := map[string]string{} // name -> type
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			families[f[2]] = f[3]
		}
	}
	exists := func(name string) bool {
		if _, ok := families[name]; ok {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && families[base] == "histogram" {
				return true
			}
		}
		return false
	}
	name := regexp.MustCompile(`\bscootgate_[a-z0-9_]*[a-z0-9]`)
	for _, file := range []string{"../../deploy/grafana/scootgate.json", "../../deploy/prometheus/alerts.yml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		found := map[string]bool{}
		for _, n := range name.FindAllString(string(data), -1) {
			found[n] = true
		}
		if len(found) < 5 {
			t.Fatalf("%s: only %d metric names found; is the pattern broken?", file, len(found))
		}
		for n := range found {
			if !exists(n) {
				t.Errorf("%s queries %s, which the node does not expose", file, n)
			}
		}
	}
}
