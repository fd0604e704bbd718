package config

import (
	"testing"
	"time"
)

// withLimits is Defaults().Limits with the body and attempt limits set.
func withLimits(bodyBytes int64, attempts int) Limits {
	l := Defaults().Limits
	l.BodyBytes, l.MaxAttempts = bodyBytes, attempts
	return l
}

func TestRulesServerLimits(t *testing.T) {
	view := func(c *Config) any { return c.Limits }
	runRules(t, []ruleCase{
		{
			name: "defaults when absent",
			view: view,
			wantView: Limits{
				BodyBytes: 32 << 20, MaxAttempts: 2,
				ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, SocketLifetime: time.Hour,
				MaxHeaderBytes: 65536, MaxConcurrentRequests: 10000, MaxUnauthenticatedPerClient: 256, ClientPenalty: 10 * time.Second, BodyReadTimeout: 2 * time.Minute,
				LingerTimeout: 5 * time.Second,
				ShedWait:      50 * time.Millisecond, ShedAfter: 100 * time.Millisecond, QueueWait: 10 * time.Second,
				LocalShare: 1,
				Store:      StoreLocal,
				Redis:      LimitsRedis{OnStoreFailure: OnStoreFailureLocal},
			},
		},
		{
			name: "lower bounds",
			add:  "[limits]\nread_header_timeout = \"100ms\"\nidle_timeout = \"100ms\"\nsocket_lifetime = \"1m\"\nmax_header_bytes = 4096\nmax_concurrent_requests = 1\nlinger_timeout = \"0s\"\n",
			view: view,
			wantView: Limits{
				BodyBytes: 32 << 20, MaxAttempts: 2,
				ReadHeaderTimeout: 100 * time.Millisecond, IdleTimeout: 100 * time.Millisecond, SocketLifetime: time.Minute,
				MaxHeaderBytes: 4096, MaxConcurrentRequests: 1, MaxUnauthenticatedPerClient: 256, ClientPenalty: 10 * time.Second, BodyReadTimeout: 2 * time.Minute, ShedWait: 50 * time.Millisecond, ShedAfter: 100 * time.Millisecond, QueueWait: 10 * time.Second,
				LingerTimeout: 0,
				LocalShare:    1,
				Store:         StoreLocal,
				Redis:         LimitsRedis{OnStoreFailure: OnStoreFailureLocal},
			},
		},
		{
			name: "upper bounds",
			add:  "[limits]\nread_header_timeout = \"1h\"\nidle_timeout = \"1h\"\nsocket_lifetime = \"24h\"\nmax_header_bytes = 1048576\nmax_concurrent_requests = 1000000\nlinger_timeout = \"1m\"\n",
			view: view,
			wantView: Limits{
				BodyBytes: 32 << 20, MaxAttempts: 2,
				ReadHeaderTimeout: time.Hour, IdleTimeout: time.Hour, SocketLifetime: 24 * time.Hour,
				MaxHeaderBytes: 1 << 20, MaxConcurrentRequests: 1000000, MaxUnauthenticatedPerClient: 256, ClientPenalty: 10 * time.Second, BodyReadTimeout: 2 * time.Minute, ShedWait: 50 * time.Millisecond, ShedAfter: 100 * time.Millisecond, QueueWait: 10 * time.Second,
				LingerTimeout: time.Minute,
				LocalShare:    1,
				Store:         StoreLocal,
				Redis:         LimitsRedis{OnStoreFailure: OnStoreFailureLocal},
			},
		},
		{
			// Zero would switch Go's guard off (unbounded), so it is refused.
			name: "zero and below",
			add:  "[limits]\nread_header_timeout = \"0s\"\nidle_timeout = \"99ms\"\nsocket_lifetime = \"59s\"\nmax_header_bytes = 4095\nmax_concurrent_requests = 0\nlinger_timeout = \"-1s\"\n",
			want: []Problem{
				{"limits.read_header_timeout", "0s is too small; expected at least 100ms"},
				{"limits.idle_timeout", "99ms is too small; expected at least 100ms"},
				{"limits.socket_lifetime", "59s is too small; expected at least 1m0s"},
				{"limits.max_header_bytes", "4095 is out of range; expected 4096..1048576"},
				{"limits.max_concurrent_requests", "0 is out of range; expected 1..1000000"},
				{"limits.linger_timeout", "-1s is too small; expected at least 0s"},
			},
		},
		{
			name: "above",
			add:  "[limits]\nread_header_timeout = \"61m\"\nidle_timeout = \"2h\"\nsocket_lifetime = \"25h\"\nmax_header_bytes = 1048577\nmax_concurrent_requests = 1000001\nlinger_timeout = \"61s\"\n",
			want: []Problem{
				{"limits.read_header_timeout", "1h1m0s is too large; expected at most 1h0m0s"},
				{"limits.idle_timeout", "2h0m0s is too large; expected at most 1h0m0s"},
				{"limits.socket_lifetime", "25h0m0s is too large; expected at most 24h0m0s"},
				{"limits.max_header_bytes", "1048577 is out of range; expected 4096..1048576"},
				{"limits.max_concurrent_requests", "1000001 is out of range; expected 1..1000000"},
				{"limits.linger_timeout", "1m1s is too large; expected at most 1m0s"},
			},
		},
		{
			name:     "max_conns_per_client",
			add:      "[limits]\nmax_conns_per_client = 64\n",
			view:     func(c *Config) any { return c.Limits.MaxConnsPerClient },
			wantView: 64,
		},
		{
			name: "max_conns_per_client out of range",
			add:  "[limits]\nmax_conns_per_client = -1\n",
			want: []Problem{{"limits.max_conns_per_client", "-1 is out of range; expected 0..1000000"}},
		},
		{
			name: "max_conns_per_client above",
			add:  "[limits]\nmax_conns_per_client = 1000001\n",
			want: []Problem{{"limits.max_conns_per_client", "1000001 is out of range; expected 0..1000000"}},
		},
		{
			name: "max_conns_per_client not an integer",
			add:  "[limits]\nmax_conns_per_client = \"64\"\n",
			want: []Problem{{"limits.max_conns_per_client", "expected an integer, got a string"}},
		},
		{
			name:     "max_unauthenticated_per_client default",
			view:     func(c *Config) any { return c.Limits.MaxUnauthenticatedPerClient },
			wantView: 256,
		},
		{
			name:     "max_unauthenticated_per_client",
			add:      "[limits]\nmax_unauthenticated_per_client = 0\n",
			view:     func(c *Config) any { return c.Limits.MaxUnauthenticatedPerClient },
			wantView: 0,
		},
		{
			name: "max_unauthenticated_per_client out of range",
			add:  "[limits]\nmax_unauthenticated_per_client = -1\n",
			want: []Problem{{"limits.max_unauthenticated_per_client", "-1 is out of range; expected 0..1000000"}},
		},
		{
			name:     "resets_per_client default",
			view:     func(c *Config) any { return c.Limits.ResetsPerClient },
			wantView: 0,
		},
		{
			name: "resets_per_client out of range",
			add:  "[limits]\nresets_per_client = 1000001\n",
			want: []Problem{{"limits.resets_per_client", "1000001 is out of range; expected 0..1000000"}},
		},
		{
			name:     "client_penalty default",
			view:     func(c *Config) any { return c.Limits.ClientPenalty },
			wantView: 10 * time.Second,
		},
		{
			name:     "client_penalty off",
			add:      "[limits]\nclient_penalty = \"0s\"\n",
			view:     func(c *Config) any { return c.Limits.ClientPenalty },
			wantView: time.Duration(0),
		},
		{
			name: "client_penalty out of range",
			add:  "[limits]\nclient_penalty = \"2h\"\n",
			want: []Problem{{"limits.client_penalty", "2h0m0s is too large; expected at most 1h0m0s"}},
		},
		{
			name:     "shed_wait and shed_after",
			add:      "[limits]\nshed_wait = \"200ms\"\nshed_after = \"300ms\"\n",
			view:     func(c *Config) any { return []time.Duration{c.Limits.ShedWait, c.Limits.ShedAfter} },
			wantView: []time.Duration{200 * time.Millisecond, 300 * time.Millisecond},
		},
		{
			name:     "shed_wait off",
			add:      "[limits]\nshed_wait = \"0s\"\n",
			view:     func(c *Config) any { return c.Limits.ShedWait },
			wantView: time.Duration(0),
		},
		{
			name: "shed_wait and shed_after out of range",
			add:  "[limits]\nshed_wait = \"11s\"\nshed_after = \"99ms\"\n",
			want: []Problem{
				{"limits.shed_wait", "11s is too large; expected at most 10s"},
				{"limits.shed_after", "99ms is too small; expected at least 100ms"},
			},
		},
		{
			name:     "queue_wait default",
			view:     func(c *Config) any { return c.Limits.QueueWait },
			wantView: 10 * time.Second,
		},
		{
			name:     "queue_wait",
			add:      "[limits]\nqueue_wait = \"0s\"\n",
			view:     func(c *Config) any { return c.Limits.QueueWait },
			wantView: time.Duration(0),
		},
		{
			name: "queue_wait out of range",
			add:  "[limits]\nqueue_wait = \"61s\"\n",
			want: []Problem{{"limits.queue_wait", "1m1s is too large; expected at most 1m0s"}},
		},
		{
			name:     "conn_rate_per_client default",
			view:     func(c *Config) any { return c.Limits.ConnRatePerClient },
			wantView: 0,
		},
		{
			name:     "conn_rate_per_client",
			add:      "[limits]\nconn_rate_per_client = 20\n",
			view:     func(c *Config) any { return c.Limits.ConnRatePerClient },
			wantView: 20,
		},
		{
			name: "conn_rate_per_client not an integer",
			add:  "[limits]\nconn_rate_per_client = 2.5\n",
			want: []Problem{{"limits.conn_rate_per_client", "expected an integer, got a float"}},
		},
		{
			name:     "local_share",
			add:      "[limits]\nlocal_share = 0.25\n",
			view:     func(c *Config) any { return c.Limits.LocalShare },
			wantView: 0.25,
		},
		{
			name:     "local_share written as 1",
			add:      "[limits]\nlocal_share = 1\n",
			view:     func(c *Config) any { return c.Limits.LocalShare },
			wantView: 1.0,
		},
		{
			name: "local_share out of range",
			add:  "[limits]\nlocal_share = 0\n",
			want: []Problem{{"limits.local_share", "0 is out of range; expected a fraction greater than 0, at most 1 (1/N for N nodes)"}},
		},
		{
			name: "local_share above 1",
			add:  "[limits]\nlocal_share = 1.5\n",
			want: []Problem{{"limits.local_share", "1.5 is out of range; expected a fraction greater than 0, at most 1 (1/N for N nodes)"}},
		},
		{
			name: "local_share not a number",
			add:  "[limits]\nlocal_share = \"1/3\"\n",
			want: []Problem{{"limits.local_share", "expected a number greater than 0, at most 1, got a string"}},
		},
		{
			name: "redis store",
			add: "[limits]\nstore = \"redis\"\n[limits.redis]\naddress = \"10.0.0.5:6379\"\nusername = \"gw\"\n" +
				"password = { env = \"PROXY_PW\" }\ntls = true\non_store_failure = \"closed\"\n",
			view: func(c *Config) any {
				r := c.Limits.Redis
				return []any{c.Limits.Store, r.Address, r.Username, r.Password.Reveal() != "", r.TLS, r.OnStoreFailure}
			},
			wantView: []any{"redis", "10.0.0.5:6379", "gw", true, true, "closed"},
		},
		{
			name:     "redis store defaults",
			add:      "[limits]\nstore = \"redis\"\n[limits.redis]\naddress = \"127.0.0.1:6379\"\n",
			view:     func(c *Config) any { return c.Limits.Redis },
			wantView: LimitsRedis{Address: "127.0.0.1:6379", OnStoreFailure: "local"},
		},
		{
			name: "redis store problems",
			add: "[limits]\nstore = \"redis\"\n[limits.redis]\naddress = \"redis:port\"\n" +
				"on_store_failure = \"retry\"\ndb = 2\n",
			want: []Problem{
				{"limits.redis.address", `expected host:port with a host and a numeric port, like "10.0.0.5:6379", got "redis:port"`},
				{"limits.redis.on_store_failure", `expected "local", "open" or "closed", got "retry"`},
				{"limits.redis.db", "unknown key; expected one of: address, master_name, on_store_failure, password, sentinel_addrs, tls, username"},
			},
		},
		{
			name: "redis store through Sentinel",
			add: "[limits]\nstore = \"redis\"\n[limits.redis]\nsentinel_addrs = [\"127.0.0.1:26379\", \"127.0.0.1:26380\"]\n" +
				"master_name = \"scootgate\"\npassword = { env = \"PROXY_PW\" }\n",
			view: func(c *Config) any {
				r := c.Limits.Redis
				return []any{r.Address, r.SentinelAddrs, r.MasterName}
			},
			wantView: []any{"", []string{"127.0.0.1:26379", "127.0.0.1:26380"}, "scootgate"},
		},
		{
			name: "redis store through Sentinel: problems",
			add: "[limits]\nstore = \"redis\"\n[limits.redis]\naddress = \"10.0.0.5:6379\"\n" +
				"sentinel_addrs = [\"10.0.0.6:26379\", \"10.0.0.6:26379\", \"sentinel\"]\npassword = { env = \"PROXY_PW\" }\n",
			want: []Problem{
				{"limits.redis.address", "not with sentinel_addrs: the Sentinels name the primary"},
				{"limits.redis.sentinel_addrs[1]", `"10.0.0.6:26379" is listed twice`},
				{"limits.redis.sentinel_addrs[2]", `expected host:port with a host and a numeric port, like "10.0.0.5:6379", got "sentinel"`},
				{"limits.redis.master_name", `missing; expected the Sentinel master set the node's limits are on, like "scootgate"`},
				{"limits.redis.password", "would cross the network in cleartext to a non-loopback Redis; set tls = true or use a loopback address"},
			},
		},
		{
			name: "redis store: master_name without Sentinel, an empty list",
			add:  "[limits]\nstore = \"redis\"\n[limits.redis]\naddress = \"10.0.0.5:6379\"\nmaster_name = \"m\"\n",
			want: []Problem{{"limits.redis.master_name", "only with sentinel_addrs"}},
		},
		{
			name: "redis store: no Sentinel listed",
			add:  "[limits]\nstore = \"redis\"\n[limits.redis]\nsentinel_addrs = []\nmaster_name = \"m\"\n",
			want: []Problem{{"limits.redis.sentinel_addrs", "expected 1 to 16 Sentinel addresses, got 0"}},
		},
		{
			name: "redis store: cleartext password to a remote Redis",
			add:  "[limits]\nstore = \"redis\"\n[limits.redis]\naddress = \"10.0.0.5:6379\"\npassword = { env = \"PROXY_PW\" }\n",
			want: []Problem{{"limits.redis.password", "would cross the network in cleartext to a non-loopback Redis; set tls = true or use a loopback address"}},
		},
		{
			name: "redis store without [limits.redis]",
			add:  "[limits]\nstore = \"redis\"\n",
			want: []Problem{{"limits.redis", `missing; store = "redis" needs a [limits.redis] table with address = "host:port"`}},
		},
		{
			name: "[limits.redis] without the redis store",
			add:  "[limits]\nstore = \"Redis\"\n[limits.redis]\naddress = \"127.0.0.1:6379\"\n",
			want: []Problem{
				{"limits.store", `expected "local" or "redis", got "Redis"`},
				{"limits.redis", `only applies with limits.store = "redis"`},
			},
		},
		{
			name: "redis address missing",
			add:  "[limits]\nstore = \"redis\"\n[limits.redis]\non_store_failure = \"open\"\n",
			want: []Problem{{"limits.redis.address", "missing; expected the Redis address, host:port (or sentinel_addrs and master_name)"}},
		},
		{
			name: "wrong types",
			add:  "[limits]\nread_header_timeout = 10\nmax_header_bytes = \"64KiB\"\n",
			want: []Problem{
				{"limits.read_header_timeout", "expected a string, got an integer"},
				{"limits.max_header_bytes", "expected an integer, got a string"},
			},
		},
	})
}
