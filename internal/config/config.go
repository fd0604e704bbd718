package config

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// Balancing algorithms (docs/routing.md "Balancing").
const (
	AlgorithmWeightedRandom = "weighted_random"
	AlgorithmWeightedP2C    = "weighted_p2c"
)

// maxFileBytes bounds every file Load reads (the config itself, CA bundles,
// TLS keys, secret files), so a path like /dev/zero fails instead of hanging.
const maxFileBytes = 16 << 20

// Config is a validated node configuration. Treat it as immutable: nothing
// in it, including the *url.URL values, may be modified after Load/Parse.
type Config struct {
	NodeID   string
	Listen   Listen
	Limits   Limits
	Timeouts Timeouts
	Drain    Drain
	Balance  Balance
	Breaker  Breaker  // see balance.go
	Cooldown Cooldown // see balance.go
	Egress   Egress
	// Credentials maps a credential name to its value, loaded at parse time,
	// and the hosts it may be sent to (docs/snapshots.md: snapshots reference
	// these names; values never leave the node config).
	Credentials map[string]credential.Credential
	// Backends and Models are the static routes ([backends] and [models]),
	// decoded into the routing snapshot's own types and checked by its own
	// rules (routesnap.ValidateRoutes), so that both route sources compile
	// the same way.
	Backends []routesnap.Backend // sorted by ID; nil when Routes.Source is a snapshot
	Models   []routesnap.Model   // sorted by Name; nil when Routes.Source is a snapshot
	Authz    Authz
	MQTT     MQTT     // usage event delivery; see mqtt.go
	Usage    Usage    // usage events and their outbox; see usage.go
	Tracing  Tracing  // OpenTelemetry trace export; see tracing.go
	Realtime Realtime // realtime session bounds; see realtime.go

	ControlPlane ControlPlane // snapshot polling, staleness, state dir; see controlplane.go
	Routes       Routes       // static or snapshot routes; see controlplane.go
}

// Listen holds the two listener addresses (docs/operations.md).
type Listen struct {
	API    string // host:port of the client API
	Health string // host:port of /healthz, /readyz and metrics; differs from API
	// TLSCertFile and TLSKeyFile, both or neither, make the API listener
	// terminate TLS 1.2+ (PEM files; checked at load time).
	TLSCertFile string
	TLSKeyFile  string
	// InsecurePlaintext is the explicit opt-in to serve the API in plaintext
	// on a non-loopback address, for TLS terminated in front of the node.
	InsecurePlaintext bool
}

// Limits are per-request limits and the API server's connection limits.
type Limits struct {
	BodyBytes   int64 // request body limit; larger bodies get 413 (docs/api.md "Body limit")
	MaxAttempts int   // total attempts per request, counting re-picks after definitely_not_sent (docs/failures.md)

	// The API listener's http.Server limits. There is deliberately no write
	// timeout: it would cut long streams (docs/architecture.md "Go traps").
	ReadHeaderTimeout time.Duration // the slowloris guard: time to read a request's headers
	IdleTimeout       time.Duration // a keep-alive connection with no request is closed after this
	// SocketLifetime bounds a Responses WebSocket's life: the first
	// frame that asks for an answer after it gets the connection-limit
	// error event and the socket is closed (docs/api.md "Responses over
	// WebSocket"); an answer that runs then is never cut for it.
	SocketLifetime time.Duration
	MaxHeaderBytes int // request line + headers; larger gets 431
	// MaxConcurrentRequests caps requests in flight on the API listener,
	// streams included; beyond it the node answers a fast 503.
	MaxConcurrentRequests int
	// ShedWait is the node's scheduling wait (how long its goroutines
	// queue for a CPU) that, sustained for ShedAfter, makes it shed until
	// it has stayed below it for ShedAfter: it serves only as many
	// requests at once as its CPU serves in time and queues the rest
	// (docs/failures.md "Shedding"). 0 = never shed.
	ShedWait  time.Duration
	ShedAfter time.Duration
	// QueueWait bounds how long a request waits for a slot while the node
	// sheds before it gets the node's 503; 0 = refused at once.
	QueueWait time.Duration
	// BodyReadTimeout bounds reading one request body; a body trickled
	// slower gets 408 (docs/api.md "Body limit"). Cleared before the answer streams.
	BodyReadTimeout time.Duration
	// LingerTimeout bounds the lingering read after an early answer (a
	// 401, 404, 413 or 503 sent before the body was read): the rest of the
	// body is read and discarded for at most this long, so that a client
	// still sending sees the answer instead of a reset. 0 = close at once.
	LingerTimeout time.Duration
	// MaxConnsPerClient bounds the API listener's connections open at
	// once from one client address (an IPv6 client's /64); a connection
	// over it is closed as it is accepted. 0: unbounded (docs/operations.md
	// "Connection floods").
	MaxConnsPerClient int
	// MaxUnauthenticatedPerClient bounds the API listener's connections
	// open at once from one client address whose first request has not
	// authenticated yet (the TLS handshake, the headers, refused keys); a
	// connection over it is closed as it is accepted. 0: unbounded.
	MaxUnauthenticatedPerClient int
	// ConnRatePerClient bounds the new API connections accepted per
	// second from one client address (a bucket of one second's worth); a
	// connection over it is closed as it is accepted. 0: unbounded.
	ConnRatePerClient int
	// ResetsPerClient bounds the requests a second, per client address,
	// that the client abandoned while the node worked on them (an HTTP/2
	// stream reset, an HTTP/1.1 connection closed before the answer; a
	// bucket of one second's worth): the connection of a reset over it
	// is closed, and the address's new connections are closed at accept
	// for ClientPenalty. 0: unbounded.
	ResetsPerClient int
	// ClientPenalty is how long a client address that went over
	// ConnRatePerClient or ResetsPerClient has its new API connections
	// closed at accept (docs/operations.md "Connection floods"). 0: only
	// until its bucket holds one more.
	ClientPenalty time.Duration

	// LocalShare is the fraction of every per-key and per-tenant limit
	// this node enforces, in (0, 1] (docs/limits.md "Behind a load
	// balancer"): behind a balancer that spreads requests over N nodes,
	// 1/N.
	LocalShare float64

	// Store keeps the per-key and per-tenant counts: StoreLocal (each
	// node its share) or StoreRedis (the fleet's, docs/limits.md
	// "Fleet-wide: the redis store").
	Store string
	Redis LimitsRedis // [limits.redis]; only with Store = StoreRedis
}

// Stores of per-key and per-tenant limits ([limits] store).
const (
	StoreLocal = "local"
	StoreRedis = "redis"
)

// What a node does while its Redis store is unreachable
// ([limits.redis] on_store_failure).
const (
	OnStoreFailureLocal  = "local"  // the local share
	OnStoreFailureOpen   = "open"   // no requests or tokens per minute
	OnStoreFailureClosed = "closed" // refuse limited requests with 503
)

// LimitsRedis is the Redis that holds the fleet's limits.
type LimitsRedis struct {
	Address string // host:port; "" with Sentinel
	// SentinelAddrs are the Redis Sentinels (host:port) that name the
	// primary of MasterName, instead of Address: the node follows a
	// failover (docs/limits.md "A replicated Redis").
	SentinelAddrs []string
	MasterName    string // the Sentinel master set; only with SentinelAddrs
	Username      string // "" = the default user
	// Password is sent to Redis (AUTH); only over TLS or to a loopback
	// address (it would otherwise cross the network in cleartext).
	Password secret.Secret
	TLS      bool // TLS to Redis, verified against the system roots
	// OnStoreFailure is one of the OnStoreFailure constants.
	OnStoreFailure string
}

// Timeouts are the separately configurable timeouts of docs/api.md "Timeouts".
type Timeouts struct {
	Connect         time.Duration // proxy dial + CONNECT/SOCKS + provider TLS
	FirstByte       time.Duration // to the response headers; a stream: its first event
	StreamIdle      time.Duration // longest gap between stream events
	StreamProgress  time.Duration // longest run of keepalives and pings without content
	StreamTotal     time.Duration // a whole stream
	NonStreamTotal  time.Duration // whole non-stream exchange
	StreamKeepalive time.Duration // 0 = off; else a keepalive after this much silence
}

// Drain controls shutdown (docs/operations.md "Drain").
type Drain struct {
	Delay time.Duration // keep accepting after /readyz fails (load balancer propagation)
	Grace time.Duration // time in-flight requests get before they are cancelled
}

// Balance selects the target selection algorithm and tunes weighted_p2c
// (docs/routing.md "Balancing").
type Balance struct {
	Algorithm   string        // AlgorithmWeightedRandom or AlgorithmWeightedP2C
	SlowStart   time.Duration // a backend new to the node ramps its weight over this; 0 = off
	DefaultTTFB time.Duration // latency estimate of a backend new to the node
	DecayWindow time.Duration // time constant of the TTFB peak-EWMA
	// AffinityLoadFactor is c of prompt-cache affinity: a session's target
	// with more than ⌈c × (mean in-flight + 1)⌉ in flight is passed over
	// for the next in its hash order (docs/routing.md "Affinity").
	AffinityLoadFactor float64
}

// Egress is how the node reaches providers: only through these proxies
// (docs/egress.md).
type Egress struct {
	Proxies []Proxy // tried in order after a dial failure; at least one
	// ProviderCAFile, when set, is a PEM bundle trusted for provider
	// certificates in addition to the system roots.
	ProviderCAFile string
	// InsecurePlaintextProxy is the explicit opt-in to a socks5:// or
	// http:// proxy on a non-loopback address: the leg to the proxy is then
	// unencrypted (the provider TLS inside it is not). Logged at every start.
	InsecurePlaintextProxy bool
	// DialsPerProxy bounds the tunnels being opened through one proxy at
	// once; a request beyond it takes a connection another request gives
	// back, or waits its turn (docs/egress.md "Connection reuse").
	DialsPerProxy int
}

// PlaintextRemote reports whether the node reaches p over the network
// without TLS: a socks5:// or http:// proxy that is not on loopback.
func (p Proxy) PlaintextRemote() bool {
	return p.URL != nil && p.URL.Scheme != "https" && !loopback(p.URL.Hostname())
}

// CredentialPolicy returns where this node lets its credentials go: each
// only to its hosts, and no http:// backend unless every egress proxy is
// on loopback (docs/egress.md "Where a credential may go"). Static routes
// passed it at load; a routing snapshot must pass it before it is applied.
func (c *Config) CredentialPolicy() credential.Policy {
	p := credential.Policy{Credentials: c.Credentials}
	for i, x := range c.Egress.Proxies {
		if x.URL != nil && !loopback(x.URL.Hostname()) {
			p.RemoteProxy, p.RemoteProxyPath = x.Name, index("egress.proxies", i)+".url"
			break
		}
	}
	return p
}

// Proxy is one egress proxy.
type Proxy struct {
	Name     string
	URL      *url.URL // socks5://, http:// or https:// (TLS to the proxy), host:port only
	Username string
	Password secret.Secret
	CAFile   string // PEM roots for an https:// proxy; "" = system roots
}

// Authz says where the authorization snapshot comes from (docs/authorization.md, docs/snapshots.md).
type Authz struct {
	// Source is "file:" followed by a path (resolved against the config
	// file's directory by Load).
	Source string
	// VerifyKeys: as [Routes.VerifyKeys], for authorization snapshots.
	VerifyKeys []ed25519.PublicKey
}

// Defaults returns the values used for every key the file leaves out:
//
//	listen.api                 "127.0.0.1:8080"
//	listen.health              "127.0.0.1:8081"
//	limits.body_bytes          33554432 (32 MiB, docs/api.md "Body limit")
//	limits.max_attempts        2
//	limits.read_header_timeout 10s
//	limits.idle_timeout        2m
//	limits.socket_lifetime     60m (OpenAI's own limit on a Responses WebSocket)
//	limits.max_header_bytes    65536 (64 KiB)
//	limits.max_concurrent_requests 10000
//	limits.shed_wait           50ms
//	limits.shed_after          100ms
//	limits.queue_wait          10s
//	limits.max_conns_per_client 0 (unbounded)
//	limits.max_unauthenticated_per_client 256
//	limits.conn_rate_per_client 0 (unbounded)
//	limits.resets_per_client   0 (unbounded)
//	limits.client_penalty      10s
//	limits.local_share         1 (docs/limits.md)
//	limits.store               "local"
//	limits.redis.on_store_failure "local"
//	realtime.frame_bytes       16777216 (16 MiB)
//	realtime.idle_timeout      5m
//	realtime.max_duration      1h
//	egress.dials_per_proxy     64
//	timeouts.connect           10s
//	timeouts.first_byte        60s
//	timeouts.stream_idle       120s
//	timeouts.stream_progress   5m, or stream_idle if that is longer
//	timeouts.stream_total      30m
//	timeouts.non_stream_total  10m
//	timeouts.stream_keepalive  0 (off)
//	drain.delay                0
//	drain.grace                15m
//	balance.algorithm          "weighted_p2c"
//	balance.slow_start         30s
//	balance.default_ttfb       1s
//	balance.decay_window       10s
//	balance.affinity_load_factor 1.25
//	breaker.failures           5
//	breaker.cooldown           5s
//	breaker.max_cooldown       5m
//	cooldown.rate_limit_default 5s
//	cooldown.rate_limit_max    60s
//	cooldown.quota             30m
//	mqtt.broker                "" (delivery off)
//	mqtt.topic                 "scootgate/usage"
//	mqtt.window                1024
//	mqtt.batch_max             1 (one event per message)
//	mqtt.max_payload           262144 (256 KiB)
//	mqtt.keepalive             30s
//	mqtt.connect_timeout       10s
//	usage.enabled              true
//	usage.outbox_path          "scootgate-outbox.db" (relative to the config file)
//	usage.max_events           100000
//	usage.max_bytes            268435456 (256 MiB)
//	usage.commit_interval      100ms
//	usage.crash_window_events  4096
//	usage.crash_window         3s
//	usage.openai_include_usage true
//	tracing.endpoint           "" (off)
//	tracing.sample_ratio       1
//	tracing.interval           5s
//	control_plane.poll_interval 10s
//	control_plane.long_poll    0 (off)
//	control_plane.long_poll_silence 10s
//	control_plane.stale_after  5m
//	control_plane.state_dir    "scootgate-state" (relative to the config file)
//	routes.source              "static"
//
// node_id, egress, backends, models and authz have no defaults.
func Defaults() Config {
	return Config{
		Listen: Listen{API: "127.0.0.1:8080", Health: "127.0.0.1:8081"},
		Limits: Limits{
			BodyBytes: 32 << 20, MaxAttempts: 2,
			ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
			SocketLifetime: time.Hour,
			MaxHeaderBytes: 64 << 10, MaxConcurrentRequests: 10000, MaxUnauthenticatedPerClient: 256,
			ShedWait: 50 * time.Millisecond, ShedAfter: 100 * time.Millisecond, QueueWait: 10 * time.Second,
			ClientPenalty:   10 * time.Second,
			BodyReadTimeout: 2 * time.Minute,
			LingerTimeout:   5 * time.Second,
			LocalShare:      1,
			Store:           StoreLocal,
			Redis:           LimitsRedis{OnStoreFailure: OnStoreFailureLocal},
		},
		Egress: Egress{DialsPerProxy: 64},
		Timeouts: Timeouts{
			Connect:        10 * time.Second,
			FirstByte:      60 * time.Second,
			StreamIdle:     120 * time.Second,
			StreamProgress: 5 * time.Minute, // or stream_idle, if longer (Validate)
			StreamTotal:    30 * time.Minute,
			NonStreamTotal: 10 * time.Minute,
		},
		Drain:    Drain{Grace: 15 * time.Minute},
		Realtime: Realtime{FrameBytes: 16 << 20, IdleTimeout: 5 * time.Minute, MaxDuration: time.Hour},
		Balance: Balance{
			Algorithm:   AlgorithmWeightedP2C,
			SlowStart:   30 * time.Second,
			DefaultTTFB: time.Second,
			DecayWindow: 10 * time.Second,
			// Low enough that no backend takes much more than its share
			// (max/mean load stays under 1.3 in the simulation of
			// docs/routing.md "Affinity"), high enough that sessions rarely
			// spill at ordinary load.
			AffinityLoadFactor: 1.25,
		},
		Breaker:  Breaker{Failures: 5, Cooldown: 5 * time.Second, MaxCooldown: 5 * time.Minute},
		Cooldown: Cooldown{RateLimitDefault: 5 * time.Second, RateLimitMax: 60 * time.Second, Quota: 30 * time.Minute, DisabledProbe: 10 * time.Minute},
		MQTT: MQTT{
			Topic: defaultMQTTTopic, Window: defaultMQTTWindow, BatchMax: 1, MaxPayload: 256 << 10,
			KeepAlive: 30 * time.Second, ConnectTimeout: 10 * time.Second,
		},
		Tracing: Tracing{SampleRatio: 1, Interval: 5 * time.Second},
		Usage:   defaultUsage(),
		ControlPlane: ControlPlane{
			PollInterval: defaultPollInterval, LongPollSilence: defaultLongPollSilence,
			StaleAfter: defaultStaleAfter, StateDir: defaultStateDir,
		},
		Routes: Routes{Source: RoutesStatic},
	}
}

// Load reads and parses the config file at path, taking secrets from the
// process environment and the file system. Relative paths in the file
// (credential and CA files, TLS files, the file: authz source) are resolved
// against the directory of path, and the Config holds the resolved
// (absolute) paths.
func Load(path string) (*Config, error) {
	data, err := readFileLimited(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	c, err := parse(data, os.LookupEnv, readFileLimited, dir)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse parses and validates a config document. getenv and readFile load
// credential values and check CA/TLS files (nil means os.LookupEnv and a
// 16 MiB-bounded os.ReadFile); paths in the document reach readFile as
// written.
//
// The error is a *SyntaxError (wrapping toml.ParseError) when the document
// is not TOML, and otherwise an *Error listing every problem found.
func Parse(data []byte, getenv func(string) (string, bool), readFile func(string) ([]byte, error)) (*Config, error) {
	return parse(data, getenv, readFile, "")
}

func parse(data []byte, getenv func(string) (string, bool), readFile func(string) ([]byte, error), dir string) (*Config, error) {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	if readFile == nil {
		readFile = readFileLimited
	}
	var doc map[string]any
	if _, err := toml.Decode(string(data), &doc); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &SyntaxError{Line: pe.Position.Line, Column: pe.Position.Col, Err: pe}
		}
		// Decoding into a map only fails on syntax; keep the contract anyway.
		return nil, &Error{Problems: []Problem{{Msg: "cannot decode TOML: " + err.Error()}}}
	}
	v := validator{getenv: getenv, readFile: readFile, dir: dir, badHosts: map[string]bool{}}
	c := v.config(newTable(&v.ps, "", doc))
	if len(v.ps.list) > 0 {
		return nil, &Error{Problems: v.ps.list}
	}
	return c, nil
}

// readFileLimited is os.ReadFile bounded by maxFileBytes.
func readFileLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("read %s: file larger than %d bytes", path, maxFileBytes)
	}
	return b, nil
}
