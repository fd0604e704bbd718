package deploy_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/config"
)

// The one-machine fleet (deploy/fleet): fleet.sh renders node-N.toml from
// node.toml.in and starts HAProxy, nginx, Mosquitto and tinyproxy with the
// files beside it. These checks keep the files in step with each other and
// with the node's own config loader, without starting anything.

var fleetNodes = []string{"1", "2", "3"}

// fleetConfigs renders and loads every node's config as fleet.sh does.
func fleetConfigs(t *testing.T) []*config.Config {
	t.Helper()
	tmpl, err := os.ReadFile("fleet/node.toml.in")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PROVIDER_KEY", "sk-test")
	dir := t.TempDir()
	var cfgs []*config.Config
	for _, n := range fleetNodes {
		path := filepath.Join(dir, "node-"+n+".toml")
		if err := os.WriteFile(path, []byte(strings.NewReplacer("@N@", n, "@PROVIDER_HOST@", "api.openai.com").Replace(string(tmpl))), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatalf("node %s: %v", n, err)
		}
		cfgs = append(cfgs, cfg)
	}
	return cfgs
}

func readText(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// match returns the submatches of re in text, or fails.
func match(t *testing.T, text, what string, re *regexp.Regexp) []string {
	t.Helper()
	m := re.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("%s: no line matching %s", what, re)
	}
	return m
}

func TestFleetNodesAreDistinct(t *testing.T) {
	ids, addrs := map[string]bool{}, map[string]bool{}
	for _, c := range fleetConfigs(t) {
		if ids[c.NodeID] {
			t.Errorf("node_id %s twice (it is also the MQTT client id)", c.NodeID)
		}
		ids[c.NodeID] = true
		for _, a := range []string{c.Listen.API, c.Listen.Health, c.ControlPlane.StateDir, c.Usage.OutboxPath} {
			if addrs[a] {
				t.Errorf("%s: %s is shared with another node", c.NodeID, a)
			}
			addrs[a] = true
		}
	}
}

// TestFleetLoadBalancer: HAProxy sends traffic to every node's API and
// health-checks /readyz on that node's health listener, and a draining
// node keeps serving longer than HAProxy takes to notice.
func TestFleetLoadBalancer(t *testing.T) {
	cfg := readText(t, "fleet/haproxy.cfg")
	want := map[string]string{}
	var delay time.Duration
	for _, c := range fleetConfigs(t) {
		_, port, err := net.SplitHostPort(c.Listen.Health)
		if err != nil {
			t.Fatal(err)
		}
		want[c.NodeID] = c.Listen.API + " check port " + port
		delay = c.Drain.Delay
	}
	got := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*server (\S+) (.+?)\s*$`).FindAllStringSubmatch(cfg, -1) {
		got[m[1]] = m[2]
	}
	if len(got) != len(want) {
		t.Errorf("servers %v, want %v", got, want)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("server %s = %q, want %q", id, got[id], w)
		}
	}
	match(t, cfg, "haproxy.cfg", regexp.MustCompile(`(?m)^\s*option httpchk GET /readyz\s*$`))
	m := match(t, cfg, "haproxy.cfg", regexp.MustCompile(`(?m)^\s*default-server inter (\d+)s fall (\d+)`))
	inter, _ := strconv.Atoi(m[1])
	fall, _ := strconv.Atoi(m[2])
	if noticed := time.Duration(inter*fall) * time.Second; delay <= noticed {
		t.Errorf("drain.delay %s does not outlast HAProxy's %s to take a failing node out", delay, noticed)
	}
}

// TestFleetServices: the nodes' sources, broker and egress proxy are the
// addresses nginx, Mosquitto and tinyproxy listen on.
func TestFleetServices(t *testing.T) {
	c := fleetConfigs(t)[0]
	nginx := readText(t, "fleet/nginx.conf")
	listen := match(t, nginx, "nginx.conf", regexp.MustCompile(`(?m)^\s*listen (\S+);`))[1]
	for _, src := range []string{c.Routes.Source, c.Authz.Source} {
		rest, ok := strings.CutPrefix(src, "http://"+listen+"/")
		if !ok || !strings.Contains(nginx, "location = /"+rest+" ") {
			t.Errorf("source %s is not served by nginx (listen %s)", src, listen)
		}
	}
	mosq := readText(t, "fleet/mosquitto.conf")
	m := match(t, mosq, "mosquitto.conf", regexp.MustCompile(`(?m)^listener (\d+) (\S+)$`))
	if want := "tcp://" + net.JoinHostPort(m[2], m[1]); c.MQTT.Broker != want {
		t.Errorf("mqtt.broker %s, Mosquitto listens on %s", c.MQTT.Broker, want)
	}
	tiny := readText(t, "fleet/tinyproxy.conf")
	port := match(t, tiny, "tinyproxy.conf", regexp.MustCompile(`(?m)^Port (\d+)$`))[1]
	host := match(t, tiny, "tinyproxy.conf", regexp.MustCompile(`(?m)^Listen (\S+)$`))[1]
	if got, want := c.Egress.Proxies[0].URL.Host, net.JoinHostPort(host, port); got != want {
		t.Errorf("egress proxy %s, tinyproxy listens on %s", got, want)
	}
}

func TestFleetScriptParses(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("SKIP: no bash to check fleet/fleet.sh's syntax")
	}
	if out, err := exec.Command(bash, "-n", "fleet/fleet.sh").CombinedOutput(); err != nil {
		t.Fatalf("bash -n fleet/fleet.sh: %v\n%s", err, out)
	}
}
