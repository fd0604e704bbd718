// Package deploy_test checks the deployment files against each other and
// against the node's own config loader: the Kubernetes manifests parse,
// probe the health listener the config really opens, outlast the drain the
// config really asks for, run non-root on a read-only root filesystem, and
// provide every secret the config references from a Secret, never from the ConfigMap.
package deploy_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/scootgate/scootgate/internal/config"
)

// The parts of the Kubernetes objects that the checks read. Unknown fields
// are ignored: this is not a schema validation, kubectl does that.
type (
	object struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name   string            `yaml:"name"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		file string
		node *yaml.Node
	}
	deployment struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Template struct {
				Metadata struct {
					Labels map[string]string `yaml:"labels"`
				} `yaml:"metadata"`
				Spec podSpec `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	podSpec struct {
		TerminationGracePeriodSeconds *int64 `yaml:"terminationGracePeriodSeconds"`
		SecurityContext               struct {
			RunAsNonRoot *bool  `yaml:"runAsNonRoot"`
			RunAsUser    *int64 `yaml:"runAsUser"`
		} `yaml:"securityContext"`
		InitContainers []container `yaml:"initContainers"`
		Containers     []container `yaml:"containers"`
	}
	container struct {
		Name    string   `yaml:"name"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Ports   []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Env             []envVar `yaml:"env"`
		ReadinessProbe  *probe   `yaml:"readinessProbe"`
		LivenessProbe   *probe   `yaml:"livenessProbe"`
		SecurityContext struct {
			RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			ReadOnly  bool   `yaml:"readOnly"`
		} `yaml:"volumeMounts"`
	}
	envVar struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	}
	probe struct {
		HTTPGet *struct {
			Path string      `yaml:"path"`
			Port intOrString `yaml:"port"`
		} `yaml:"httpGet"`
	}
	service struct {
		Spec struct {
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				Port       int         `yaml:"port"`
				TargetPort intOrString `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	pdb struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
		} `yaml:"spec"`
	}
	configMap struct {
		Data map[string]string `yaml:"data"`
	}
)

// intOrString is a Kubernetes port reference: a number or a port name.
type intOrString string

func (s *intOrString) UnmarshalYAML(n *yaml.Node) error {
	*s = intOrString(n.Value)
	return nil
}

// loadManifests parses every YAML document under k8s/.
func loadManifests(t *testing.T) map[string]*object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("k8s", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in k8s/: %v", err)
	}
	byKind := map[string]*object{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			o := &object{file: f, node: &n}
			if err := n.Decode(o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Fatalf("%s: a document without apiVersion, kind or metadata.name", f)
			}
			if prev, dup := byKind[o.Kind]; dup {
				t.Fatalf("%s and %s both hold a %s; the checks expect one", prev.file, f, o.Kind)
			}
			byKind[o.Kind] = o
		}
	}
	for _, kind := range []string{"ConfigMap", "Deployment", "PodDisruptionBudget", "Service"} {
		if byKind[kind] == nil {
			t.Fatalf("no %s in k8s/", kind)
		}
	}
	return byKind
}

func decode[T any](t *testing.T, o *object) *T {
	t.Helper()
	v := new(T)
	if err := o.node.Decode(v); err != nil {
		t.Fatalf("%s: %v", o.file, err)
	}
	return v
}

// fixture is the parsed manifests plus the node config they carry.
type fixture struct {
	pod     podSpec
	labels  map[string]string
	node    container // the scootgate container
	cfg     *config.Config
	envUsed []string // environment variables the config read
}

func load(t *testing.T) fixture {
	t.Helper()
	objs := loadManifests(t)
	d := decode[deployment](t, objs["Deployment"])
	f := fixture{pod: d.Spec.Template.Spec, labels: d.Spec.Template.Metadata.Labels}
	i := slices.IndexFunc(f.pod.Containers, func(c container) bool { return c.Name == "scootgate" })
	if i < 0 {
		t.Fatal("the Deployment has no container named scootgate")
	}
	f.node = f.pod.Containers[i]

	toml, ok := decode[configMap](t, objs["ConfigMap"]).Data["scootgate.toml"]
	if !ok {
		t.Fatal("the ConfigMap has no scootgate.toml")
	}
	// What the node-id init container does.
	toml = strings.ReplaceAll(toml, "@POD_NAME@", "scootgate-5d8c7b9f4-x2k4q")
	// The loader sees exactly what the pod provides: the container's
	// declared environment and files under its mounts.
	declared := map[string]bool{}
	for _, e := range f.node.Env {
		declared[e.Name] = true
	}
	getenv := func(name string) (string, bool) {
		f.envUsed = append(f.envUsed, name)
		if !declared[name] {
			return "", false
		}
		return "test-value-" + name, true
	}
	certPEM, keyPEM := selfSigned(t)
	readFile := func(path string) ([]byte, error) {
		if _, ok := f.mountFor(path); !ok {
			return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
		}
		if strings.HasSuffix(path, ".key") {
			return keyPEM, nil
		}
		return certPEM, nil
	}
	cfg, err := config.Parse([]byte(toml), getenv, readFile)
	if err != nil {
		var cerr *config.Error
		if errors.As(err, &cerr) {
			for _, p := range cerr.Problems {
				t.Errorf("configmap.yaml scootgate.toml: %s: %s", p.Path, p.Msg)
			}
		}
		t.Fatalf("the ConfigMap's config does not load in the pod: %v", err)
	}
	f.cfg = cfg
	return f
}

// mountFor returns the scootgate container's mount that holds path.
func (f fixture) mountFor(path string) (readOnly bool, ok bool) {
	for _, m := range f.node.VolumeMounts {
		if strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
			return m.ReadOnly, true
		}
	}
	return false, false
}

// port resolves a probe or Service port (a number or a container port
// name) against the scootgate container.
func (f fixture) port(t *testing.T, p intOrString) int {
	t.Helper()
	if n, err := strconv.Atoi(string(p)); err == nil {
		return n
	}
	for _, cp := range f.node.Ports {
		if cp.Name == string(p) {
			return cp.ContainerPort
		}
	}
	t.Fatalf("port %q is not a port of the scootgate container", p)
	return 0
}

func listenPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestProbesUseTheHealthListener(t *testing.T) {
	f := load(t)
	health, api := listenPort(t, f.cfg.Listen.Health), listenPort(t, f.cfg.Listen.API)
	if got := f.port(t, "health"); got != health {
		t.Errorf("container port health = %d, config listen.health port = %d", got, health)
	}
	if got := f.port(t, "api"); got != api {
		t.Errorf("container port api = %d, config listen.api port = %d", got, api)
	}
	for _, p := range []struct {
		name  string
		probe *probe
		path  string
	}{
		{"readinessProbe", f.node.ReadinessProbe, "/readyz"},
		{"livenessProbe", f.node.LivenessProbe, "/healthz"},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: missing, or not an httpGet probe", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s path = %q, want %q", p.name, p.probe.HTTPGet.Path, p.path)
		}
		if got := f.port(t, p.probe.HTTPGet.Port); got != health {
			t.Errorf("%s port = %d, want the health listener's %d (the API listener does not serve %s)", p.name, got, health, p.path)
		}
	}
}

func TestServiceExposesOnlyTheAPI(t *testing.T) {
	objs := loadManifests(t)
	f := load(t)
	svc := decode[service](t, objs["Service"])
	if len(svc.Spec.Ports) == 0 {
		t.Fatal("the Service has no ports")
	}
	api := listenPort(t, f.cfg.Listen.API)
	for _, p := range svc.Spec.Ports {
		if got := f.port(t, p.TargetPort); got != api {
			t.Errorf("Service port %d targets %d, want only the API port %d (health and metrics stay off the Service)", p.Port, got, api)
		}
	}
	for name, sel := range map[string]map[string]string{
		"Service":             svc.Spec.Selector,
		"PodDisruptionBudget": decode[pdb](t, objs["PodDisruptionBudget"]).Spec.Selector.MatchLabels,
	} {
		if len(sel) == 0 {
			t.Errorf("%s: empty selector", name)
		}
		for k, v := range sel {
			if f.labels[k] != v {
				t.Errorf("%s selects %s=%s, which the pods do not carry", name, k, v)
			}
		}
	}
}

func TestGraceOutlastsTheDrain(t *testing.T) {
	f := load(t)
	if f.pod.TerminationGracePeriodSeconds == nil {
		t.Fatal("no terminationGracePeriodSeconds: the default 30s would cut streams")
	}
	grace := time.Duration(*f.pod.TerminationGracePeriodSeconds) * time.Second
	need := f.cfg.Drain.Delay + f.cfg.Drain.Grace
	if grace <= need {
		t.Fatalf("terminationGracePeriodSeconds = %v, must exceed drain.delay + drain.grace = %v", grace, need)
	}
}

func TestPodHardening(t *testing.T) {
	f := load(t)
	if sc := f.pod.SecurityContext; sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if sc := f.pod.SecurityContext; sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Error("pod securityContext.runAsUser is unset or root")
	}
	for _, c := range append(slices.Clone(f.pod.InitContainers), f.pod.Containers...) {
		sc := c.SecurityContext
		if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
			t.Errorf("container %s: runAsNonRoot false", c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: readOnlyRootFilesystem is not true", c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s: allowPrivilegeEscalation is not false", c.Name)
		}
	}
	// With a read-only root, every path the node writes must be on a
	// writable volume.
	for key, path := range map[string]string{
		"usage.outbox_path":       f.cfg.Usage.OutboxPath,
		"control_plane.state_dir": f.cfg.ControlPlane.StateDir + "/",
	} {
		ro, ok := f.mountFor(path)
		if !ok || ro {
			t.Errorf("%s %s is not on a writable volume of the scootgate container", key, path)
		}
	}
}

// TestSecretsComeFromASecret: every environment variable the config reads
// is declared on the container and filled from a Secret, never written as
// a literal value in the manifest.
func TestSecretsComeFromASecret(t *testing.T) {
	f := load(t)
	if len(f.envUsed) == 0 {
		t.Fatal("the config reads no environment variable; expected provider keys")
	}
	for _, name := range f.envUsed {
		i := slices.IndexFunc(f.node.Env, func(e envVar) bool { return e.Name == name })
		if i < 0 {
			t.Errorf("the config reads $%s; the container does not set it", name)
			continue
		}
		e := f.node.Env[i]
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("$%s is not taken from a Secret (valueFrom.secretKeyRef)", name)
		}
	}
}

// TestConfigReachesTheNode: the node reads the file the init container
// writes, on a volume both mount.
func TestConfigReachesTheNode(t *testing.T) {
	f := load(t)
	i := slices.Index(f.node.Args, "--config")
	if i < 0 || i+1 >= len(f.node.Args) {
		t.Fatalf("scootgate args %q: no --config FILE", f.node.Args)
	}
	path := f.node.Args[i+1]
	if _, ok := f.mountFor(path); !ok {
		t.Fatalf("--config %s is not on a volume of the scootgate container", path)
	}
	written := false
	for _, c := range f.pod.InitContainers {
		if strings.Contains(strings.Join(c.Command, " "), "> "+path) {
			written = true
		}
	}
	if !written {
		t.Fatalf("no init container writes %s", path)
	}
}

// TestContainerfile: the image runs as the user the Deployment expects, on
// a distroless base, from a static build.
func TestContainerfile(t *testing.T) {
	data, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	f := load(t)
	var from, user []string
	static := false
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "FROM":
			from = append(from, fields[1])
		case "USER":
			user = append(user, fields[1])
		case "RUN":
			static = static || strings.Contains(line, "CGO_ENABLED=0")
		}
	}
	if len(from) < 2 || !strings.Contains(from[len(from)-1], "distroless/static") || !strings.HasSuffix(from[len(from)-1], ":nonroot") {
		t.Errorf("stages %q: want a build stage then distroless/static …:nonroot", from)
	}
	if !static {
		t.Error("the binary is not built with CGO_ENABLED=0 (distroless/static has no libc)")
	}
	want := strconv.FormatInt(*f.pod.SecurityContext.RunAsUser, 10)
	if len(user) == 0 || !strings.HasPrefix(user[len(user)-1], want+":") {
		t.Errorf("USER %q, want %s (the Deployment's runAsUser)", user, want)
	}
}

// selfSigned returns a PEM certificate and its key, for the TLS and CA
// files the config names.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "scootgate deploy test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}
