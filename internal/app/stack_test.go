package app

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/devstack/connectproxy"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/devstack/faketoken"
	"github.com/scootgate/scootgate/internal/devstack/socks5proxy"
	"github.com/scootgate/scootgate/internal/logline"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// Canary secrets: none of them may ever appear in a log line or a body the
// client receives (docs/authorization.md; checked in every stack's cleanup).
const (
	clientKey       = "sk-canary-client-7f3a9c1d"
	limitedKey      = "sk-canary-limited-0b8e2f44"
	openAIProvKey   = "pk-canary-openai-51b2e7"
	anthropProvKey  = "pk-canary-anthropic-88c1d0"
	geminiProvKey   = "pk-canary-gemini-3e94a7"
	proxyUser       = "sgtest"
	proxyPassword   = "proxy-canary-pass-6d1f"
	openAIModel     = "demo-gpt"
	anthropicModel  = "demo-claude"
	openAIProvModel = "fake-gpt-1"
	geminiModel     = "demo-gemini"
	geminiProvModel = "fake-gemini-1"
	anthProvModel   = "fake-claude-1"
)

var canaries = []string{clientKey, limitedKey, openAIProvKey, anthropProvKey, geminiProvKey, proxyPassword}

// logBuffer collects the node's log output, for tests that check what it
// says (tests wait on events, not on log lines).
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newLogBuffer() *logBuffer { return &logBuffer{} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// mustContain fails the test unless the log already holds substr: for
// lines written before a hook the test waited on.
func (b *logBuffer) mustContain(t *testing.T, substr string) {
	t.Helper()
	if !strings.Contains(b.String(), substr) {
		t.Fatalf("log does not contain %q; log:\n%s", substr, b.String())
	}
}

// eventLog records the node's lifecycle hooks (Options.Hooks) as lines
// such as "draining", "grace over", "snapshot routes applied 2",
// "snapshot routes applied 1 from disk", "snapshot authz rejected: why",
// "request chat_completions 502 definitely_not_sent" and "refused 404
// not_found", and lets a test wait for one without sleeping or reading
// the log.
type eventLog struct {
	mu      sync.Mutex
	events  []string
	changed chan struct{} // closed and replaced on every event
}

func newEventLog() *eventLog { return &eventLog{changed: make(chan struct{})} }

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf(format, args...))
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *eventLog) hooks() Hooks {
	var checks atomic.Int64
	return Hooks{
		Draining:  func() { l.add("draining") },
		GraceOver: func() { l.add("grace over") },
		Snapshot: func(e SnapshotEvent) {
			switch {
			case e.Err != nil:
				l.add("snapshot %s rejected: %v", e.Name, e.Err)
			case e.FromDisk:
				l.add("snapshot %s applied %d from disk", e.Name, e.Version)
			default:
				l.add("snapshot %s applied %d", e.Name, e.Version)
			}
		},
		Request: func(endpoint string, status int, sendState string) {
			l.add("request %s %d %s", endpoint, status, sendState)
		},
		Refused:            func(status int, reason string) { l.add("refused %d %s", status, reason) },
		CredentialsChecked: func() { l.add("credentials checked %d", checks.Add(1)) },
	}
}

// waitFor blocks until an event that is prefix, or prefix followed by
// more words, happened, or fails the test after d.
func (l *eventLog) waitFor(t *testing.T, prefix string, d time.Duration) {
	t.Helper()
	l.wait(t, prefix, d, func(e string) bool {
		return e == prefix || strings.HasPrefix(e, prefix+" ") || strings.HasPrefix(e, prefix+":")
	})
}

// waitForContaining blocks until an event holding substr happened (such
// as the reason of a rejection), or fails the test after d.
func (l *eventLog) waitForContaining(t *testing.T, substr string, d time.Duration) {
	t.Helper()
	l.wait(t, substr, d, func(e string) bool { return strings.Contains(e, substr) })
}

func (l *eventLog) wait(t *testing.T, what string, d time.Duration, match func(string) bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		found := slices.ContainsFunc(l.events, match)
		ch, events := l.changed, slices.Clone(l.events)
		l.mu.Unlock()
		if found {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("no %q event within %v; events: %q", what, d, events)
		}
	}
}

type stackOptions struct {
	pprof     string // Options.Pprof
	egress    string // "socks" (default) or "connect"
	proxyURL  string // overrides the in-process proxy (real daemons, dead ports)
	proxyAuth bool   // CONNECT proxy with Basic auth
	// deadProxyFirst lists a proxy nothing listens on ("dead-first")
	// before the working one.
	deadProxyFirst bool
	cap            int    // max_inflight_per_node of every backend (default 16)
	firstByte      string // timeouts.first_byte (default 5s)
	idle           string // timeouts.stream_idle (default 5s)
	keepalive      string // timeouts.stream_keepalive (default 0s: off)
	grace          string // drain.grace (default 5s)
	delay          string // drain.delay (default 0s)
	attempts       int    // limits.max_attempts (default 2)
	bodyLimit      int    // limits.body_bytes (default 1 MiB)
	limits         string // more [limits] keys, one per line
	extraTOML      string
	// gemini adds a Gemini backend "gm" on the fake provider, serving all
	// five Gemini endpoints, and the model demo-gemini on it (its target of
	// weight weight, like the first OpenAI one).
	gemini bool
	// second adds a second OpenAI backend "oa2" (its own fake provider,
	// s.prov2) as a demo-gpt target of weight 1; weight is the first
	// target's weight (default 1).
	second bool
	weight int
	// script overrides the first provider's behaviour (fakeprovider.Options.Script).
	script func(fakeprovider.Request) *fakeprovider.Behaviour
	// connectAllow filters the in-process CONNECT proxy's targets.
	connectAllow func(host string, port int) bool
	tlsCert      string // listen.tls_cert_file (and tlsKey): serve the API over TLS
	// insecurePlaintext sets listen.insecure_plaintext.
	insecurePlaintext bool
	tlsKey            string
	// routesSource, when set, is [routes] source: backends and models come
	// from that routing snapshot, not from this file (do not combine with
	// second or extraTOML routes). Its credentials are "oa" and "an".
	routesSource string
	authzSource  string // [authz] source instead of the stack's authz.json file
	// authzVerifyKey, with authzSource, is a PEM public key file: [authz]
	// verify_keys, so the authorization snapshot must be signed by it.
	authzVerifyKey string
	stateDir       string // control_plane.state_dir (default: in the stack's dir); share it to restart a node
	controlPlane   string // more [control_plane] keys, one per line
	// credFile, when set, is the file the "oa" credential is read from
	// (instead of the environment); credTicks drives its re-reads
	// (Options.CredentialTicks). anyKey lets the fake providers accept any
	// credential, as a provider accepts both keys during a rotation.
	credFile  string
	credTicks chan time.Time
	anyKey    bool
	// authHeader is the "oa" credential's auth_header ("": none).
	authHeader string
	// openFiles, when set, is the open-file limit the node is told it
	// has (Options.OpenFileLimit).
	openFiles uint64
	// bedrock makes the fake provider Bedrock Runtime too (SigV4 with
	// the test's AWS keys) and adds an aws credential "aws", a Bedrock
	// backend "br" and the model bedrockModel: a Bedrock target (tier 0)
	// and the Anthropic backend "an" (tier 1). bedrockSecret, when set,
	// replaces the node's secret access key (a wrong one).
	bedrock       bool
	bedrockSecret string
	// stsURL, when set with bedrock, is a fake STS (TLS, its certificate
	// the PEM file stsCA) and the "aws" credential is then an
	// aws_web_identity one for stsRole with the token file stsTokenFile,
	// its keys minted on tokenClock.
	stsURL, stsCA, stsTokenFile string
	// azure makes the fake provider Azure OpenAI too (api-key azureKey)
	// and adds a static credential "az", an Azure backend "az" (its
	// api_version azureVersion: a date, or "v1") and the model azureModel: the Azure target (tier 0) and the
	// OpenAI backend "oa" (tier 1).
	azure        bool
	azureVersion string
	// entra, when set with azure, is a fake Entra tenant (entraTenant,
	// entraClient, entraSecret) served with TLS at entraURL, whose
	// certificate entraCA (a PEM file) the node trusts: the Azure backend
	// then uses an azure_entra credential "entra" on it, and the fake
	// provider takes its live tokens (tokenClock is the node's clock).
	entra    *faketoken.Entra
	entraURL string
	entraCA  string
	// outboxPath, when set, is usage.outbox_path (default: in the stack's dir).
	outboxPath string
	// vertex serves a fake Google token endpoint over TLS (s.google) and
	// makes the fake provider Vertex AI too, taking only its live tokens;
	// it adds the gcp_service_account credential "gcp" (the key file,
	// the endpoint's certificate trusted by egress.provider_tls), the
	// Vertex backends "vx" (anthropic) and "vg" (gemini), the model
	// vertexModel (the Vertex target, tier 0; "an", tier 1) and
	// vertexGeminiModel (only "vg"). tokenClock is the clock of both the
	// node's tokens and the endpoint (nil: time.Now).
	vertex     bool
	tokenClock func() time.Time
	// underLoad lengthens timeouts.connect and non_stream_total (2s and
	// 10s by default) to a minute, for tests that run hundreds of
	// requests at once on a shared machine.
	underLoad bool
}

type stack struct {
	t        *testing.T
	prov     *fakeprovider.Provider
	provURL  string
	google   *faketoken.Google      // with stackOptions.vertex
	tokens   *gate                  // holds grants at s.google's endpoint, with stackOptions.vertex
	prov2    *fakeprovider.Provider // with stackOptions.second
	prov2URL string
	socks    *socks5proxy.Server
	connect  *connectproxy.Server
	api      string // http://host:port
	health   string
	pprof    string // http://host:port of the profiling listener, with stackOptions.pprof
	logs     *logBuffer
	events   *eventLog
	dir      string // config, authz, state and outbox files
	stop     context.CancelFunc
	done     chan error
	stopOnce sync.Once
}

func startStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	if o.cap == 0 {
		o.cap = 16
	}
	if o.firstByte == "" {
		o.firstByte = "5s"
	}
	if o.idle == "" {
		o.idle = "5s"
	}
	if o.delay == "" {
		o.delay = "0s"
	}
	if o.keepalive == "" {
		o.keepalive = "0s"
	}
	if o.grace == "" {
		o.grace = "5s"
	}
	if o.attempts == 0 {
		o.attempts = 2
	}
	if o.bodyLimit == 0 {
		o.bodyLimit = 1 << 20
	}
	s := &stack{t: t, logs: newLogBuffer(), events: newEventLog(), dir: t.TempDir()}
	oaKey := openAIProvKey
	if o.anyKey {
		oaKey = ""
	}
	po := fakeprovider.Options{OpenAIKey: oaKey, AnthropicKey: anthropProvKey, GeminiKey: geminiProvKey, Script: o.script}
	if o.bedrock {
		po.BedrockKeys = bedrockKeys
	}
	if o.vertex {
		o.extraTOML += s.startVertex(o.tokenClock)
		po.VertexTokens, po.VertexProject = s.google, vertexProject
	}
	if o.azure {
		po.AzureKey = azureKey
	}
	if o.entra != nil {
		po.AzureToken = o.entra.Authorized
	}
	s.prov = fakeprovider.New(po)
	var err error
	if s.provURL, err = s.prov.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.prov.Close() })
	if o.weight == 0 {
		o.weight = 1
	}
	// "#PROV#" in extraTOML stands for the fake provider's base URL.
	o.extraTOML = strings.ReplaceAll(o.extraTOML, "#PROV#", s.provURL)
	if o.second {
		s.prov2 = fakeprovider.New(fakeprovider.Options{OpenAIKey: oaKey, GeminiKey: geminiProvKey})
		if s.prov2URL, err = s.prov2.Start("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.prov2.Close() })
		o.extraTOML += fmt.Sprintf(`
[backends.oa2]
protocol = "openai"
base_url = %q
credential = "oa"
max_inflight_per_node = %d
[[models.%s.targets]]
backend = "oa2"
model = %q
weight = 1
stream = true
tools = true
`, s.prov2URL, o.cap, openAIModel, openAIProvModel)
	}

	if o.gemini {
		// "#GEMINI_BASE#" in extraTOML stands for the fake provider's
		// Gemini base URL, for tests that add backends of their own.
		geminiBase := strings.TrimSuffix(s.provURL, "/v1") + "/v1beta"
		o.extraTOML = strings.ReplaceAll(o.extraTOML, "#GEMINI_BASE#", geminiBase)
		o.extraTOML += fmt.Sprintf(`
[credentials.gm]
env = "TEST_GEMINI_KEY"
hosts = ["127.0.0.1"]
[backends.gm]
protocol = "gemini"
base_url = %q
credential = "gm"
max_inflight_per_node = %d
endpoints = ["generate_content", "stream_generate_content", "gemini_count_tokens", "embed_content", "batch_embed_contents"]
[models.%s]
[[models.%s.targets]]
backend = "gm"
model = %q
weight = %d
stream = true
tools = true
json_schema = true
`, geminiBase, o.cap, geminiModel, geminiModel, geminiProvModel, o.weight)
		if o.second {
			o.extraTOML += fmt.Sprintf(`
[backends.gm2]
protocol = "gemini"
base_url = %q
credential = "gm"
max_inflight_per_node = %d
endpoints = ["generate_content", "stream_generate_content"]
[[models.%s.targets]]
backend = "gm2"
model = %q
weight = 1
stream = true
tools = true
json_schema = true
`, strings.TrimSuffix(s.prov2URL, "/v1")+"/v1beta", o.cap, geminiModel, geminiProvModel)
		}
	}

	if o.bedrock {
		awsCred := `
[credentials.aws]
kind = "aws"
hosts = ["127.0.0.1"]
region = "us-east-1"
access_key_id = { env = "TEST_AWS_ACCESS_KEY_ID" }
secret_access_key = { env = "TEST_AWS_SECRET_ACCESS_KEY" }
session_token = { env = "TEST_AWS_SESSION_TOKEN" }`
		if o.stsURL != "" {
			awsCred = fmt.Sprintf(`
[egress.provider_tls]
ca_file = %q
[credentials.aws]
kind = "aws_web_identity"
hosts = ["127.0.0.1"]
region = "us-east-1"
role_arn = %q
web_identity_token_file = %q
sts_endpoint = %q`, o.stsCA, stsRole, o.stsTokenFile, o.stsURL)
		}
		o.extraTOML += awsCred + fmt.Sprintf(`
[backends.br]
protocol = "anthropic"
platform = "bedrock"
region = "us-east-1"
base_url = %q
credential = "aws"
max_inflight_per_node = %d
endpoints = ["messages", "count_tokens"]
[models.%s]
[[models.%s.targets]]
backend = "br"
model = %q
weight = 1
stream = true
tools = true
[[models.%s.targets]]
backend = "an"
model = %q
weight = 1
tier = 1
stream = true
tools = true
`, strings.TrimSuffix(s.provURL, "/v1"), o.cap, bedrockModel, bedrockModel, bedrockProvModel, bedrockModel, anthProvModel)
	}

	// The fake provider's root, for backends whose paths start at /model/.
	o.extraTOML = strings.ReplaceAll(o.extraTOML, "#PROV_ROOT#", strings.TrimSuffix(s.provURL, "/v1"))
	if o.vertex {
		o.extraTOML = strings.ReplaceAll(o.extraTOML, "#VERTEX_BASE#", strings.TrimSuffix(s.provURL, "/v1"))
		o.extraTOML = strings.ReplaceAll(o.extraTOML, "#CAP#", fmt.Sprint(o.cap))
	}
	if o.azure {
		version := fmt.Sprintf("api_version = %q", o.azureVersion)
		cred := "az"
		if o.entra != nil {
			cred = "entra"
			o.extraTOML += fmt.Sprintf(`
[credentials.entra]
kind = "azure_entra"
hosts = ["127.0.0.1"]
tenant_id = %q
client_id = %q
client_secret = { env = "TEST_ENTRA_SECRET" }
authority_host = %q
[egress.provider_tls]
ca_file = %q
`, entraTenant, entraClient, o.entraURL, o.entraCA)
		}
		o.extraTOML += fmt.Sprintf(`
[credentials.az]
env = "TEST_AZURE_KEY"
hosts = ["127.0.0.1"]
[backends.az]
protocol = "openai"
platform = "azure"
%s
base_url = %q
credential = %q
max_inflight_per_node = %d
endpoints = ["chat_completions", "embeddings", "responses"]
[models.%s]
[[models.%s.targets]]
backend = "az"
model = %q
weight = 1
stream = true
tools = true
[[models.%s.targets]]
backend = "oa"
model = %q
weight = 1
tier = 1
stream = true
tools = true
`, version, strings.TrimSuffix(s.provURL, "/v1"), cred, o.cap, azureModel, azureModel, azureDeployment, azureModel, openAIProvModel)
	}

	proxyTOML, realProxyPassword := "", ""
	switch {
	case o.proxyURL != "":
		// Credentials never go in the URL (config rejects userinfo): split
		// them into username and an env-provided password.
		u, err := url.Parse(o.proxyURL)
		if err != nil {
			t.Fatal(err)
		}
		user := u.User
		u.User = nil
		proxyTOML = fmt.Sprintf("name = \"test-proxy\"\nurl = %q\n", u.String())
		if pass, ok := user.Password(); ok {
			realProxyPassword = pass
			proxyTOML += fmt.Sprintf("username = %q\npassword = { env = \"TEST_REAL_PROXY_PASSWORD\" }\n", user.Username())
		}
	case o.egress == "connect":
		opts := connectproxy.Options{Allow: o.connectAllow}
		if o.proxyAuth {
			opts.Username, opts.Password = proxyUser, proxyPassword
		}
		srv, addr, err := connectproxy.Listen("127.0.0.1:0", opts)
		if err != nil {
			t.Fatal(err)
		}
		s.connect = srv
		t.Cleanup(func() { srv.Close() })
		proxyTOML = fmt.Sprintf("name = \"test-connect\"\nurl = \"http://%s\"\n", addr)
		if o.proxyAuth {
			proxyTOML += fmt.Sprintf("username = %q\npassword = { env = \"TEST_PROXY_PASSWORD\" }\n", proxyUser)
		}
	default:
		srv, addr, err := socks5proxy.Listen("127.0.0.1:0", socks5proxy.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.socks = srv
		t.Cleanup(func() { srv.Close() })
		proxyTOML = fmt.Sprintf("name = \"test-socks\"\nurl = \"socks5://%s\"\n", addr)
	}

	if o.deadProxyFirst {
		proxyTOML = fmt.Sprintf("name = \"dead-first\"\nurl = \"socks5://%s\"\n[[egress.proxies]]\n", deadAddr(t)) + proxyTOML
	}

	dir := s.dir
	authzPath := filepath.Join(dir, "authz.json")
	writeAuthz(t, authzPath, 1)

	toml := fmt.Sprintf(`node_id = "test-node"
[listen]
api = "127.0.0.1:0"
health = "127.0.0.1:0"
#TLS#
[limits]
body_bytes = %d
max_attempts = %d
#LIMITS#
[timeouts]
connect = "2s"
first_byte = %q
stream_idle = %q
stream_keepalive = %q
non_stream_total = "10s"
[drain]
delay = %q
grace = %q
[[egress.proxies]]
%s
[credentials.oa]
env = "TEST_OPENAI_KEY"
hosts = ["127.0.0.1"]
[credentials.an]
env = "TEST_ANTHROPIC_KEY"
hosts = ["127.0.0.1"]
#STATIC-ROUTES#
[backends.oa]
protocol = "openai"
base_url = %q
credential = "oa"
max_inflight_per_node = %d
endpoints = ["chat_completions", "responses", "embeddings", "responses_compact", "responses_input_tokens", "completions", "rerank", "audio_speech", "audio_transcriptions", "audio_translations", "image_generations", "image_edits"]
[backends.an]
protocol = "anthropic"
base_url = %q
credential = "an"
max_inflight_per_node = %d
endpoints = ["messages", "count_tokens"]
[models.%s]
[[models.%s.targets]]
backend = "oa"
model = %q
weight = %d
stream = true
tools = true
[models.%s]
[[models.%s.targets]]
backend = "an"
model = %q
weight = 1
stream = true
tools = true
json_schema = true
#END-STATIC-ROUTES#
[authz]
source = "file:%s"
[control_plane]
state_dir = %q
#CONTROL-PLANE#
[usage]
outbox_path = %q
%s`, o.bodyLimit, o.attempts, o.firstByte, o.idle, o.keepalive, o.delay, o.grace, proxyTOML,
		s.provURL, o.cap, s.provURL, o.cap,
		openAIModel, openAIModel, openAIProvModel, o.weight, anthropicModel, anthropicModel, anthProvModel,
		authzPath, filepath.Join(dir, "state"), cmp.Or(o.outboxPath, filepath.Join(dir, "outbox.db")), o.extraTOML)
	tlsTOML := ""
	if o.tlsCert != "" {
		tlsTOML = fmt.Sprintf("tls_cert_file = %q\ntls_key_file = %q", o.tlsCert, o.tlsKey)
	}
	if o.insecurePlaintext {
		tlsTOML = "insecure_plaintext = true"
	}
	toml = strings.Replace(toml, "#TLS#", tlsTOML, 1)
	if o.authHeader != "" {
		toml = strings.Replace(toml, "[credentials.oa]\n", fmt.Sprintf("[credentials.oa]\nauth_header = %q\n", o.authHeader), 1)
	}
	if o.credFile != "" {
		toml = strings.Replace(toml, "[credentials.oa]\nenv = \"TEST_OPENAI_KEY\"", fmt.Sprintf("[credentials.oa]\nfile = %q", o.credFile), 1)
	}
	if o.underLoad {
		toml = strings.Replace(toml, "connect = \"2s\"\n", "connect = \"1m\"\n", 1)
		toml = strings.Replace(toml, "non_stream_total = \"10s\"\n", "non_stream_total = \"1m\"\n", 1)
	}
	limits := o.limits
	if !strings.Contains(limits, "shed_wait") {
		// These tests share race-instrumented CPUs with other builds:
		// scheduling waits that are the machine's, not the node's load,
		// must not shed their requests. Shedding has its own tests
		// (internal/upstream, internal/gateway).
		// First, so that it stays in [limits] whatever subtables
		// (limits.redis) the test's own lines open.
		limits = "shed_wait = \"0s\"\n" + limits
	}
	toml = strings.Replace(toml, "#LIMITS#", limits, 1)
	toml = strings.Replace(toml, "#CONTROL-PLANE#", o.controlPlane, 1)
	if o.routesSource != "" {
		start, end := strings.Index(toml, "#STATIC-ROUTES#"), strings.Index(toml, "#END-STATIC-ROUTES#")
		toml = toml[:start] + fmt.Sprintf("[routes]\nsource = %q\n", o.routesSource) + toml[end:]
	}
	if o.authzSource != "" {
		src := fmt.Sprintf("source = %q", o.authzSource)
		if o.authzVerifyKey != "" {
			src += fmt.Sprintf("\nverify_keys = [%q]", o.authzVerifyKey)
		}
		toml = strings.Replace(toml, fmt.Sprintf("source = \"file:%s\"", authzPath), src, 1)
	}
	if o.stateDir != "" {
		toml = strings.Replace(toml, fmt.Sprintf("state_dir = %q", filepath.Join(dir, "state")), fmt.Sprintf("state_dir = %q", o.stateDir), 1)
	}
	env := map[string]string{
		"TEST_OPENAI_KEY": openAIProvKey, "TEST_ANTHROPIC_KEY": anthropProvKey, "TEST_GEMINI_KEY": geminiProvKey, "TEST_PROXY_PASSWORD": proxyPassword,
		"TEST_REAL_PROXY_PASSWORD": realProxyPassword,
		"TEST_AWS_ACCESS_KEY_ID":   bedrockKeys.AccessKeyID, "TEST_AWS_SECRET_ACCESS_KEY": bedrockKeys.SecretAccessKey,
		"TEST_AWS_SESSION_TOKEN": bedrockKeys.SessionToken, "TEST_AZURE_KEY": azureKey, "TEST_ENTRA_SECRET": entraSecret,
	}
	if o.bedrockSecret != "" {
		env["TEST_AWS_SECRET_ACCESS_KEY"] = o.bedrockSecret
	}
	cfg, err := config.Parse([]byte(toml), func(k string) (string, bool) { v, ok := env[k]; return v, ok }, os.ReadFile)
	if err != nil {
		t.Fatalf("config: %v\n%s", err, toml)
	}

	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.done = make(chan error, 1)
	ready := make(chan struct{})
	log := slog.New(logline.NewHandler(s.logs, slog.LevelDebug)) // the node's handler
	var openFiles func() (uint64, bool)
	if o.openFiles > 0 {
		openFiles = func() (uint64, bool) { return o.openFiles, true }
	}
	go func() {
		s.done <- Run(ctx, cfg, Options{
			OpenFileLimit:   openFiles,
			Logger:          log,
			Hooks:           s.events.hooks(),
			Pprof:           o.pprof,
			CredentialTicks: o.credTicks,
			TokenClock:      o.tokenClock,
			PprofListening:  func(a net.Addr) { s.pprof = "http://" + a.String() },
			Listening: func(api, health net.Addr) {
				scheme := "http://"
				if o.tlsCert != "" {
					scheme = "https://"
				}
				s.api, s.health = scheme+api.String(), "http://"+health.String()
				close(ready)
			},
		})
	}()
	select {
	case <-ready:
	case err := <-s.done:
		t.Fatalf("node did not start: %v", err)
	}
	t.Cleanup(func() {
		s.shutdown()
		for _, c := range canaries {
			if strings.Contains(s.logs.String(), c) {
				t.Errorf("a secret appeared in the node's logs")
			}
		}
	})
	return s
}

// shutdown cancels the node and waits for Run to return (bounded).
func (s *stack) shutdown() {
	s.stopOnce.Do(func() {
		s.stop()
		select {
		case err := <-s.done:
			if err != nil {
				s.t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			s.t.Errorf("node did not stop within 30s")
		}
	})
}

func writeAuthz(t *testing.T, path string, version uint64) {
	t.Helper()
	doc := authsnap.Snapshot{Schema: authsnap.Schema, Version: version, Keys: []authsnap.Key{
		{KeyID: "k-full", TenantID: "t-1", Digest: authsnap.Digest(clientKey)},
		{KeyID: "k-limited", TenantID: "t-2", Digest: authsnap.Digest(limitedKey), Models: []string{anthropicModel}},
	}}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

type response struct {
	status int
	header http.Header
	body   string
	close  bool // the server asked to close the connection (Connection: close)
}

// do sends one raw HTTP request to the node's API.
func (s *stack) do(method, path string, header map[string]string, body string) response {
	s.t.Helper()
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.api+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	for _, c := range canaries {
		if strings.Contains(string(data), c) || strings.Contains(fmt.Sprint(resp.Header), c) {
			s.t.Errorf("%s %s: a secret appeared in the response", method, path)
		}
	}
	return response{resp.StatusCode, resp.Header, string(data), resp.Close}
}
