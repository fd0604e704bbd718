// Package config loads a node's TOML configuration: raw document →
// validation that collects every problem with its TOML path → an immutable
// [Config] with defaults applied and credentials loaded.
//
// # Basics
//
// [Load] reads a file; [Parse] takes the bytes plus injectable environment
// and file readers (tests, fuzzing). Both return a [*SyntaxError] (wrapping
// toml.ParseError, with line and column) when the file is not TOML, and
// otherwise an [*Error] whose Problems name each offending key path
// (`backends.openai-1.base_url`, `models."gpt 4".targets[2].weight`) and say
// what was expected. Unknown keys are problems too, so a typo never silently
// becomes a default. Defaults live in one place, [Defaults].
//
// The document is decoded into a generic map and read key by key rather than
// decoded into a struct: a struct decode stops at the first type mismatch and
// cannot name array indices, while this reports every problem with its
// full path, in a fixed order (sections as below, keys sorted).
//
// # Paths
//
// [Load] resolves relative paths (credential files, CA bundles, TLS files,
// file: snapshot sources, control_plane.state_dir and usage.outbox_path) against the directory
// of the config file, and the Config holds the resolved paths. [Parse] passes paths to its readFile as
// written.
//
// # Secrets
//
// A secret is never written in the file; it is a reference, { env = "NAME" }
// or { file = "PATH" } (exactly one). Credential and proxy password values
// are loaded while parsing, so an unset variable or unreadable file is a
// problem at that reference's path (`credentials.openai-main.env`). File
// values lose one trailing "\n" or "\r\n". No message ever contains a
// secret value: URLs are not quoted (they may carry user info), a value of
// the wrong type is described by its type only, and syntax errors report a
// position, not the source line.
//
// # The file
//
// testdata/config/example.toml (at the repository root) is the annotated
// reference and must load cleanly; testdata/config/dev.toml is what `make
// run` uses. In short:
//
//	node_id = "node-a"                  # required; 1-64 of [A-Za-z0-9._-]
//
//	[listen]                            # docs/operations.md
//	api = "127.0.0.1:8080"              # host:port
//	health = "127.0.0.1:8081"           # must differ from api
//	tls_cert_file = ""                  # PEM chain + key, both or neither:
//	tls_key_file = ""                   #   the API listener terminates TLS 1.2+
//	insecure_plaintext = false          # required for plaintext on a non-loopback api address
//
//	[limits]
//	body_bytes = 33554432               # 1 KiB .. 1 GiB (default 32 MiB, docs/api.md "Body limit")
//	max_attempts = 2                    # 1..5, total attempts incl. re-picks after definitely_not_sent (docs/failures.md)
//	read_header_timeout = "10s"         # 100ms..1h: slowloris guard; a connection whose headers are late is closed
//	idle_timeout = "2m"                 # 100ms..1h: idle keep-alive connections are closed after this
//	                                    #   (and Responses WebSockets on which no answer ran)
//	socket_lifetime = "60m"             # 1m..24h: a Responses WebSocket's life; the next frame after it
//	                                    #   gets the connection-limit error event and the socket closes
//	body_read_timeout = "2m"            # 100ms..1h: a request body not received within this gets 408
//	                                    #   and the connection is closed, whatever the framing
//	linger_timeout = "5s"               # 0..1m: after an answer sent before the body was read (401,
//	                                    #   404, 413, 503), read and discard the rest this long, then
//	                                    #   close; 0 = close at once
//	max_header_bytes = 65536            # 4 KiB..1 MiB: request line + headers; larger gets 431
//	max_concurrent_requests = 10000     # 1..1000000 requests in flight (streams too); beyond: fast 503,
//	                                    #   Retry-After: 1, x-should-retry: true. No write timeout, ever:
//	                                    #   it would cut long streams (docs/architecture.md "Go traps")
//	shed_wait = "50ms"                  # 0..10s: the node's scheduling wait that, in every 100ms window
//	                                    #   for shed_after, makes it shed until it has stayed below it as
//	                                    #   long: requests beyond what its CPU serves in time wait for a
//	                                    #   slot, first come first served (docs/failures.md "Shedding"); 0 = never
//	shed_after = "100ms"                # 100ms..1m
//	queue_wait = "10s"                  # 0..1m: the longest such wait, then a fast 503, Retry-After: 1,
//	                                    #   x-should-retry: true; 0 = the 503 at once
//	max_conns_per_client = 0            # 0..1000000 connections open at once per client address (IPv6: /64);
//	                                    #   over it closed at accept; 0 = unbounded (docs/operations.md)
//	max_unauthenticated_per_client = 256 # 0..1000000 of those whose first request has not authenticated
//	                                    #   yet (TLS handshake, headers, refused keys); 0 = unbounded
//	conn_rate_per_client = 0            # 0..1000000 new connections a second per client address (a
//	                                    #   bucket of one second's worth); 0 = unbounded
//	resets_per_client = 0               # 0..1000000 requests a second one client address may abandon
//	                                    #   while the node works on them (an HTTP/2 stream reset, an
//	                                    #   HTTP/1.1 connection closed before the answer, a connection
//	                                    #   given up before its first request was read; a bucket of
//	                                    #   one second's worth); over it the connection is closed, and
//	                                    #   new ones for client_penalty; 0 = unbounded
//	client_penalty = "10s"              # 0..1h: an address over conn_rate_per_client or
//	                                    #   resets_per_client has its new connections closed at accept
//	                                    #   this long; 0 = until its bucket holds one more
//
//	[realtime]                          # realtime sessions (docs/api.md "Realtime sessions")
//	frame_bytes = 16777216              # 4 KiB..256 MiB: one message either way; a client's larger one: close 1009
//	idle_timeout = "5m"                 # 100ms..24h: no frame either way this long closes the session
//	max_duration = "1h"                 # 100ms..24h: a session's whole life
//
//	[timeouts]                          # Go durations (docs/api.md "Timeouts"); all but stream_keepalive >= 1ms
//	connect = "10s"                     # proxy dial + CONNECT/SOCKS + provider TLS
//	first_byte = "60s"                  # to the response headers; a stream: its first event
//	stream_idle = "120s"                # longest gap between stream events
//	stream_progress = "5m"              # longest run of only keepalive comments and pings after the
//	                                    #   first event (default: 5m, or stream_idle if longer)
//	stream_total = "30m"                # a whole stream, from sending the request
//	non_stream_total = "10m"            # whole non-stream exchange
//	stream_keepalive = "0s"             # 0 = off; else >= 1s and < stream_idle
//
//	[drain]                             # docs/operations.md "Drain"
//	delay = "0s"                        # keep accepting after /readyz fails
//	grace = "15m"                       # time in-flight requests get to finish
//
//	[balance]                           # docs/routing.md "Balancing"
//	algorithm = "weighted_p2c"          # or "weighted_random" (weight only, the degraded mode)
//	slow_start = "30s"                  # 0..1h, 0 = off: a new backend's weight ramps 10% → 100%
//	default_ttfb = "1s"                 # 1ms..10m: latency estimate of a backend new to the node
//	decay_window = "10s"                # 100ms..1h: time constant of the TTFB peak-EWMA
//
//	[breaker]                           # docs/failures.md "Breaker": per backend, node-local
//	failures = 5                        # 1..1000 consecutive transport failures open it
//	cooldown = "5s"                     # 100ms..1h: first open period, then exactly one probe
//	max_cooldown = "5m"                 # cooldown..24h: cap on the doubling after failed probes
//
//	[cooldown]                          # docs/failures.md "Cooldowns": provider 429s
//	rate_limit_default = "5s"           # 100ms..1h: rest after a 429 without Retry-After
//	rate_limit_max = "60s"              # rate_limit_default..1h: cap on a 429's Retry-After and a headroom reset
//	quota = "30m"                       # 1s..168h: rest after quota exhaustion (429 insufficient_quota, 400
//	                                    #   "credit balance is too low", 402); longer if the provider names a later reset
//	disabled_probe = "10m"              # 1s..168h: a backend disabled by a provider 401/403 gets one probe
//	                                    #   request after this; any answer but 401/403 re-enables it
//
//	[egress]
//	insecure_plaintext_proxy = false    # true: socks5:// / http:// proxies off loopback allowed (warned at every start)
//	dials_per_proxy = 64                # 1..100000 tunnels being opened through one proxy at once
//	                                    #   (docs/egress.md "Connection reuse")
//
//	[[egress.proxies]]                  # at least one, tried in order (docs/egress.md)
//	name = "local-socks"                # 1-64 of [A-Za-z0-9._-], unique
//	url = "socks5://127.0.0.1:11080"    # socks5:// | http:// | https:// (TLS to the proxy); host:port only
//	username = ""
//	password = { env = "SG_PROXY_PASSWORD" }
//	ca_file = ""                        # https:// proxies only; "" = system roots
//
//	[egress.provider_tls]
//	ca_file = ""                        # extra PEM bundle trusted for providers, added to the system roots
//
//	[credentials.openai-main]           # exactly one of env / file
//	env = "OPENAI_API_KEY"
//	hosts = ["api.openai.com", "*.openai.azure.com"]  # required: where it may be sent; exact host, IP
//	                                    #   or "*." + domain (one or more labels, not the domain itself);
//	                                    #   no port; any case; IDNs in punycode (docs/egress.md)
//	auth_header = "bearer"              # optional: "bearer" | "x-api-key" | "api-key" | "x-goog-api-key";
//	                                    #   absent = the backend protocol's own header (docs/operations.md
//	                                    #   "Credentials"); a file credential is re-read when its file changes
//
//	[backends.openai-1]                 # docs/routing.md "Models and targets"; id: 1-64 of [A-Za-z0-9._-]
//	protocol = "openai"                 # "openai" | "anthropic" | "gemini"
//	base_url = "https://api.openai.com/v1"   # + each endpoint's path (/chat/completions, /responses, …)
//	credential = "openai-main"
//	max_inflight_per_node = 256         # 1..100000 (docs/failures.md)
//	include_usage = true                # openai only; default true; see the rules below (docs/usage-events.md)
//	endpoints = ["chat_completions", "responses", "embeddings"]
//	                                    # default: ["chat_completions"] (openai), ["messages"] (anthropic),
//	                                    # ["generate_content", "stream_generate_content"] (gemini);
//	                                    # openai also "responses_compact", "responses_input_tokens";
//	                                    # openai also "completions", "rerank", "audio_speech",
//	                                    # "audio_transcriptions", "audio_translations",
//	                                    # "image_generations", "image_edits";
//	                                    # anthropic: "messages", "count_tokens"; gemini: those two and
//	                                    # "gemini_count_tokens", "embed_content", "batch_embed_contents";
//	                                    # a model's requests to an endpoint go only to backends that list
//	                                    # it (docs/api.md). A gemini base_url ends before "models":
//	                                    # "https://generativelanguage.googleapis.com/v1beta"
//
//	[[models."gpt-4o".targets]]         # public model name: 1-256 characters, no control characters
//	backend = "openai-1"
//	model = "gpt-4o-2024-08-06"         # the provider's model name, same rules
//	weight = 100                        # 1..1000000
//	stream = true                       # capabilities (docs/routing.md "Capabilities"), default false
//	tools = true
//	json_schema = false
//	tier = 0                            # >= 0, lower preferred (docs/routing.md "Models and targets")
//
//	[[models."claude-*".targets]]       # a pattern: a final "*" (docs/routing.md "Aliases and patterns");
//	backend = "anthropic-1"             #   exact names first, then the longest prefix
//	model = "claude-*"                  # "*" = what the star matched: here the whole asked name
//	weight = 1
//
//	[authz]
//	source = "file:/etc/scootgate/authz.json"  # file:<path>, file:///<path> or an https:// URL
//	verify_keys = ["cp-2026.pub"]       # optional: snapshots must be signed by one of these keys
//
//	[routes]
//	source = "static"                   # or a routing snapshot: file:<path> or an https:// URL
//	verify_keys = ["cp-2026.pub", """
//	-----BEGIN PUBLIC KEY-----
//	MCowBQYDK2VwAyEA...
//	-----END PUBLIC KEY-----"""]       # files or inline PEM; snapshot sources only
//
//	[control_plane]                     # docs/snapshots.md; applies to every snapshot source
//	token = { env = "SG_CP_TOKEN" }     # optional: Authorization: Bearer <token> to http(s) sources
//	ca_file = ""                        # PEM roots for https:// sources; "" = system roots
//	client_cert_file = ""               # mutual TLS: PEM chain and key, both or neither
//	client_key_file = ""
//	poll_interval = "10s"               # >= 1s; each pause varies by ±10 %
//	long_poll = "0s"                    # 0 = off; whole seconds, sent as ?wait=<seconds>
//	long_poll_silence = "10s"           # 2s..1m whole seconds: a held request silent this long is given up
//	stale_after = "5m"                  # >= 3 × poll_interval + long_poll; then /readyz fails
//	state_dir = "scootgate-state"       # last good snapshots and version floors
//
//	[mqtt]                              # usage event delivery (docs/usage-events.md "Delivery"); client id "scootgate-" + node_id
//	broker = "tcp://127.0.0.1:1883"     # tcp://host:port | ssl://host:port; "" (default) = delivery off
//	topic = "scootgate/usage"           # no wildcards
//	username = "scootgate"
//	password = { env = "SG_MQTT_PASSWORD" }
//	ca_file = ""                        # ssl:// only; "" = system roots
//	window = 1024                       # 1..65535 publishes awaiting their PUBACK
//	max_payload = 262144                # 1..267386880 (255 MiB); larger events are dropped unpublished and counted
//	keepalive = "30s"                   # whole seconds, 1s..65535s
//	connect_timeout = "10s"             # 1ms..10m
//
//	[usage]                             # usage events and their outbox (docs/usage-events.md)
//	enabled = true
//	serve_without_outbox = false        # true: an outbox that cannot open leaves the node serving unbilled; false: unready
//	outbox_path = "scootgate-outbox.db" # bbolt file, relative to the config file; its directory must exist
//	max_events = 100000                 # 1..10000000 rows
//	max_bytes = 268435456               # 1 MiB..16 GiB of payloads, an integer (256 MiB)
//	commit_interval = "100ms"           # 1ms..1s group-commit window: about one fsync per window
//	crash_window_events = 4096          # 16..1000000 events not yet on disk: at most what a crash loses
//	crash_window = "3s"                 # 100ms..1m, above commit_interval: the oldest of them, at most
//	openai_include_usage = true         # inject stream_options.include_usage, hide the extra chunk
//
//	[tracing]                           # OpenTelemetry traces over OTLP/HTTP (docs/operations.md "Traces")
//	endpoint = ""                       # collector traces URL; "" = off; http:// only to loopback
//	sample_ratio = 1                    # 0..1 of new traces; a client's traceparent decides for its own
//	interval = "5s"                     # 100ms..1m: longest wait before a partial batch is exported
//
// # Rules beyond types and ranges
//
//   - [backends] and [models] decode into the routing snapshot's types
//     (pkg/routesnap) and are checked by its rules, routesnap.ValidateRoutes,
//     with the same messages, at TOML key paths: backends[i] is
//     backends.<id> and models[i] is models.<name>. A problem at a key that
//     is missing or of the wrong type is reported once, by type. So a route
//     is valid here exactly when it is valid in a snapshot.
//   - docs/egress.md: a backend base_url is an absolute http(s) URL with a host, no
//     user info, query or fragment; http:// only for a loopback host (an IP
//     literal in 127.0.0.0/8 or ::1, or "localhost"; no name is resolved);
//     no link-local or cloud metadata address (routesnap.CheckBaseURL).
//     A trailing "/" is dropped when the routes are compiled.
//   - docs/egress.md: at least one egress proxy; there is no direct connection. A
//     proxy URL carries no user info (credentials go in username/password).
//     A plaintext proxy (socks5:// or http://) must be on a loopback address
//     unless egress.insecure_plaintext_proxy = true, and never carries a
//     password unless it is on loopback: HTTP CONNECT Basic and SOCKS5
//     username/password authentication both send it in cleartext. Use an
//     https:// proxy for that.
//   - docs/egress.md "Which legs are encrypted": an http:// backend (static or
//     in a routing snapshot) only while every egress proxy is on loopback:
//     the proxy resolves the backend's host, so its loopback is the proxy's
//     machine, and the request, credential included, is plaintext inside the
//     tunnel. Reported at backends.<id>.base_url, naming the proxy.
//   - docs/egress.md "Where a credential may go": every credential has hosts,
//     at least one entry, each accepted by credential.ParseHost, none twice
//     (in normal form); required for static routes too, so that no table the
//     node compiles can send a credential to a host its owner did not list.
//     A backend whose base_url host its credential does not list is a
//     problem at backends.<id>.credential (not repeated when the
//     credential's own hosts list has a problem). [Config.CredentialPolicy]
//     is the same check for routing snapshots.
//   - docs/operations.md: a plaintext API listener on a non-loopback address needs
//     listen.insecure_plaintext = true (TLS terminated in front of the node).
//   - CA bundles and the TLS key pair are read and parsed at load time, so
//     `scootgate check` catches a bad path; the listener and egress read them
//     again when they start.
//   - Every backend credential names a [credentials.*]; every target backend
//     names a [backends.*]; a model has at least one target, and no two of
//     its targets share backend and model. Credentials nothing references
//     are allowed (route snapshots may use them, docs/snapshots.md).
//   - include_usage is rejected on an anthropic or gemini backend: it only applies to
//     OpenAI streams. The node injects stream_options.include_usage only
//     when both it (default true) and usage.openai_include_usage are true.
//   - With routes.source = "static" (the default), at least one backend and
//     one model. With a snapshot source, [backends] and [models] must be
//     absent: the snapshot is the only source of routes (two would drift
//     apart), and it names credentials from [credentials].
//   - authz.source is required. Snapshot sources (authz.source,
//     routes.source) are file:<path>, file:///<path> (host empty or
//     localhost), or an absolute http(s) URL without user info, query or
//     fragment (the token goes in control_plane.token); http:// only for a
//     loopback host, like provider URLs (docs/egress.md).
//   - verify_keys (authz, and routes with a snapshot source) lists ed25519
//     public keys, each a PEM file path (relative to the config file) or
//     the PEM text inline, as `openssl pkey -pubout` writes them; a file
//     may hold several. They are read and parsed at load time. When set,
//     every document must be a DSSE envelope signed by one of them
//     (docs/snapshots.md "Signed snapshots"); an empty list is an error
//     (leave the key out instead).
//   - control_plane.stale_after is at least 3 × poll_interval + long_poll,
//     so that one or two slow polls do not make the node unready.
//     long_poll is whole seconds. The client certificate and key are read
//     and checked at load time, like the CA bundle.
//   - breaker.max_cooldown must be at least breaker.cooldown, and
//     cooldown.rate_limit_max at least cooldown.rate_limit_default.
//   - mqtt.broker is optional: without it events stay in the outbox (which
//     fills to its bound, then drops the newest, counted) and the node says
//     so at start. The URL carries no user info, path or query. A password
//     needs a username, and goes only to an ssl:// broker or a loopback one
//     (it would otherwise cross the network in cleartext); ca_file only
//     applies to ssl://. mqtt.max_payload must stay below the broker's own
//     limit: brokers may acknowledge and then drop larger messages.
//   - usage.outbox_path is resolved like the other paths, the default too,
//     but not opened at load time: an outbox that cannot be opened at start
//     (unwritable directory, file locked by another node) leaves the node
//     serving with usage events disabled, and it says why (docs/usage-events.md: the API
//     keeps serving). A full or failing outbox drops the newest event,
//     counted.
package config
