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
// [Load] resolves relative paths (credential files, CA bundles, TLS files and
// the file: authz source) against the directory of the config file, and the
// Config holds the resolved paths. [Parse] passes paths to its readFile as
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
//	[listen]                            # SPEC §9
//	api = "127.0.0.1:8080"              # host:port
//	health = "127.0.0.1:8081"           # must differ from api
//	tls_cert_file = ""                  # PEM chain + key, both or neither:
//	tls_key_file = ""                   #   the API listener terminates TLS 1.2+
//	insecure_plaintext = false          # required for plaintext on a non-loopback api address
//
//	[limits]
//	body_bytes = 33554432               # 1 KiB .. 1 GiB (SPEC §11: default 32 MiB)
//	max_attempts = 2                    # 1..5, total attempts incl. re-picks after definitely_not_sent (SPEC §6)
//
//	[timeouts]                          # Go durations (SPEC §11); all but stream_keepalive >= 1ms
//	connect = "10s"                     # proxy dial + CONNECT/SOCKS + provider TLS
//	first_byte = "60s"                  # response headers and first body byte
//	stream_idle = "120s"                # longest gap between stream events
//	non_stream_total = "10m"            # whole non-stream exchange
//	stream_keepalive = "0s"             # 0 = off; else >= 1s and < stream_idle
//
//	[drain]                             # SPEC §9, §11
//	delay = "0s"                        # keep accepting after /readyz fails
//	grace = "15m"                       # time in-flight requests get to finish
//
//	[balance]
//	algorithm = "weighted_random"       # or "weighted_p2c" (SPEC §5)
//
//	[[egress.proxies]]                  # at least one, tried in order (SPEC §3)
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
//
//	[backends.openai-1]                 # SPEC §4; id: 1-64 of [A-Za-z0-9._-]
//	protocol = "openai"                 # "openai" | "anthropic"
//	base_url = "https://api.openai.com/v1"   # + /chat/completions or /messages
//	credential = "openai-main"
//	max_inflight_per_node = 256         # 1..100000 (SPEC §6)
//
//	[[models."gpt-4o".targets]]         # public model name: 1-256 characters, no control characters
//	backend = "openai-1"
//	model = "gpt-4o-2024-08-06"         # the provider's model name, same rules
//	weight = 100                        # 1..1000000
//	stream = true                       # capabilities (SPEC §1), default false
//	tools = true
//	json_schema = false
//	tier = 0                            # >= 0, lower preferred (SPEC §4)
//
//	[authz]
//	source = "file:/etc/scootgate/authz.json"  # file:<path> or file:///<path>
//
// # Rules beyond types and ranges
//
//   - SPEC §3: a backend base_url is an absolute http(s) URL with a host, no
//     user info, query or fragment; http:// only for a loopback host (an IP
//     literal in 127.0.0.0/8 or ::1, or "localhost"; no name is resolved).
//     A trailing "/" is dropped.
//   - SPEC §3: at least one egress proxy; there is no direct connection. A
//     proxy URL carries no user info (credentials go in username/password).
//     A plaintext proxy (socks5:// or http://) is allowed, since the provider
//     connection inside the tunnel is TLS, but not with a password unless the
//     proxy is on a loopback address: HTTP CONNECT Basic and SOCKS5
//     username/password authentication both send it in cleartext. Use an
//     https:// proxy for that.
//   - SPEC §9: a plaintext API listener on a non-loopback address needs
//     listen.insecure_plaintext = true (TLS terminated in front of the node).
//   - CA bundles and the TLS key pair are read and parsed at load time, so
//     `scootgate check` catches a bad path; the listener and egress read them
//     again when they start.
//   - Every backend credential names a [credentials.*]; every target backend
//     names a [backends.*]; a model has at least one target, and no two of
//     its targets share backend and model. Credentials nothing references
//     are allowed (route snapshots may use them, SPEC §7).
//   - At least one backend and one model (static routes are the only route
//     source so far).
//   - authz.source is required; http(s):// sources are rejected as not
//     supported yet.
//   - balance.algorithm defaults to weighted_random until weighted_p2c is
//     implemented (SPEC §5 names weighted_p2c as the eventual default).
package config
