// Package metrics exports the node's Prometheus metrics with
// github.com/prometheus/client_golang, on the health listener only (docs/operations.md
// "Metrics").
//
// # Basics
//
// [New] builds a [Metrics] on its own registry (never the global
// DefaultRegisterer) with the Go runtime (go_*) and process (process_*)
// collectors. The app owns the value and mounts [Metrics.Handler] on the
// health listener's mux.
//
// The request path calls [Metrics.ObserveRequest], [Metrics.ObserveModels]
// and [Metrics.ObserveAttempt] through a small interface of its own (typed
// values, so no caller builds a label string); the egress dialer's failure
// hook calls [Metrics.ObserveEgressError] for every proxy attempt that
// failed, the ones a later proxy made up for included. They do not allocate, and on a nil *Metrics they do
// nothing, so tests need no registry.
//
// Everything else is state that other components already keep: it is read
// when Prometheus scrapes, by one collector that calls the functions the
// app registered ([Metrics.RegisterBackends], [Metrics.RegisterSnapshot],
// [Metrics.RegisterOutbox], [Metrics.RegisterMQTT],
// [Metrics.RegisterUsage]). No goroutine, no copy of the state, and a
// family whose source is not registered is simply absent.
//
// # Labels
//
// No label ever carries an API key, a key digest, a provider credential, a
// URL, a request or response body, or an error text. Each label
// value is a word from a closed set, or a config id checked for the id
// shape (1-64 of [A-Za-z0-9._-], which no URL, header or body has). A value
// outside its set is exported as "unknown" (closed sets) or "invalid"
// (ids), never as given.
//
//	endpoint    chat_completions, messages, responses, embeddings,
//	            count_tokens (provider.Endpoint), models, unknown
//	code        the HTTP status sent to the client, 100-599; unknown otherwise
//	send_state  definitely_not_sent, possibly_sent, response_received (docs/failures.md),
//	            none (no attempt: the node answered by itself), unknown
//	stream      true, false
//	backend     backend id from config or the route snapshot
//	platform    the backend's platform (docs/routing.md "Platforms"): openai,
//	            anthropic, google (the protocols' own APIs), bedrock, vertex,
//	            azure; unknown
//	outcome     success, provider_error, rate_limited, quota_exhausted,
//	            auth_rejected, transport_failure, egress_fault, cancelled,
//	            node_overloaded, credential_unavailable (upstream.Outcome),
//	            unknown
//	proxy       egress proxy name from config
//	stage       proxy_dial, proxy_auth, proxy_tls, proxy_policy, target, provider_tls
//	            (egress.Stage), unknown
//	model       public model name (valid UTF-8, 1-256 runes, no control
//	            characters), _other beyond the bound; invalid otherwise
//	class       2xx, 3xx, 4xx, 5xx, none
//	type        input, output, cache_read, cache_write, reasoning
//	kind        authz, routes
//	version, revision, goversion
//	            1-128 of [A-Za-z0-9._+-]; "invalid" otherwise
//	reason      full, queue, failing, closed
//	result      recorded, dropped, oversize, invalid (usage events);
//	            exported, dropped, failed (trace spans)
//
// # Request path
//
//	scootgate_requests_total{endpoint,code,send_state}        counter
//	    Client requests, counted when the response ends, by the status
//	    sent and the final attempt's send state.
//	scootgate_request_duration_seconds{endpoint,stream}       histogram
//	    Arrival to end of response (the whole stream for streams).
//	    Buckets 5 ms to 10 min.
//	scootgate_upstream_attempts_total{backend,platform,outcome}        counter
//	    Provider attempts, one per pick (re-picks after definitely_not_sent
//	    count again), by how the attempt ended for the backend. platform
//	    is the backend's: one per backend id, so it adds no series (a
//	    backend redefined on another platform under the same id keeps its
//	    old series until ForgetBackend).
//	scootgate_upstream_ttfb_seconds{backend,platform}                  histogram
//	    Request sent to first response byte, successful attempts only: an
//	    error reply is not a latency sample (docs/failures.md "Fast
//	    errors"). Buckets 50 ms to 60 s.
//	scootgate_egress_errors_total{proxy,stage}                counter
//	    Dials that failed before any request byte (egress.NotSentError).
//	    proxy_dial, proxy_auth, proxy_tls and proxy_policy are egress faults; target and
//	    provider_tls are the backend's (docs/egress.md "Failures").
//	scootgate_affinity_placements_total{placement}            counter
//	    Provider attempts by how the target was chosen (docs/routing.md
//	    "Affinity"): affinity hits, prefix-affinity hits, spills by reason (spill_overloaded,
//	    spill_unavailable, spill_retry), keyless requests of models with
//	    affinity on, balanced ones of models with it off. Never a session.
//	scootgate_limits_refused_total{scope,kind}                counter
//	    Requests refused with 429 by a per-key or per-tenant limit
//	    (docs/limits.md "Refusals"): scope key or tenant, kind requests,
//	    tokens, concurrency or budget (docs/limits.md "Budgets"); kind store for the 503s of a node whose
//	    redis store is down with on_store_failure = "closed". Never a key
//	    or tenant id.
//	scootgate_fallbacks_total{from,to,reason}                 counter
//	    Requests served by a fallback model (docs/routing.md "Fallbacks"):
//	    from is the model entry the request named (a pattern by its
//	    pattern), to the model that served, reason why from could not
//	    take it: endpoint, capability, context, not_sent, at_cap, headroom
//	    or unavailable. Only pairs a chain of the routes defines.
//
// # Node
//
//	scootgate_build_info{version,revision,goversion}    gauge    always 1; the running build (-X main.version,
//	                                                             the VCS revision Go embedded, the Go version)
//	scootgate_ready                                     gauge    1 when /readyz answers 200
//	scootgate_draining                                  gauge    1 from the start of the drain to exit
//	scootgate_limits_store_up                           gauge    1 while the redis store of limits answers, 0 while
//	                                                             the node falls back (limits.store = "redis" only)
//	scootgate_limits_store_round_trips_total            counter  round trips to the redis store of limits: takes,
//	                                                             hold refreshes, budget reads and charges; not probes
//	scootgate_usage_events_enabled                      gauge    1 while usage events are recorded, 0 while the
//	                                                             node runs without them (usage.enabled = false,
//	                                                             or an outbox that could not open)
//	scootgate_client_inflight                           gauge    client requests in flight on the API listener
//	scootgate_client_max_concurrent_requests            gauge    limits.max_concurrent_requests (or the lower limit the
//	                                                             open-file limit allows), to compare with it
//	scootgate_client_refused_total                      counter  requests answered 503 at once at that limit, or refused
//	                                                             while the node sheds (docs/failures.md "Shedding")
//	scootgate_client_queued                             gauge    requests waiting for a slot while the node sheds
//	scootgate_client_conns_refused_total                counter  API connections closed at accept: their address
//	                                                             over a per-address bound, or in its penalty
//	scootgate_client_conns_reset_closed_total           counter  API connections closed for their address's
//	                                                             abandoned requests (limits.resets_per_client)
//	scootgate_client_penalties_total                    counter  penalties begun (limits.client_penalty)
//	scootgate_trace_spans_total{result}                 counter  trace spans exported, dropped (queue full) or
//	                                                             failed (collector refused); with tracing on only
//	scootgate_credential_reloads_total{result}          counter  re-reads of file credentials after their file
//	                                                             changed: changed, or failed (the old value stays);
//	                                                             with file credentials only
//	scootgate_credential_token_state{credential,state}  gauge    1 for the state a minted-token credential
//	                                                             (gcp_service_account, azure_entra) is in: ok,
//	                                                             pending, refresh_failing or expired (its backends are
//	                                                             unusable); with such credentials only
//
// scootgate_egress_errors_total exists at 0 for every stage of every
// configured proxy from the start ([Metrics.InitEgress]), so an alert on
// its rate sees 0 rather than no data.
//
// # Models (from each attempt's usage event, [Metrics.Record])
//
//	scootgate_model_requests_total{model,backend,class}     counter
//	    Provider attempts by the class of the status sent to the client:
//	    2xx, 3xx, 4xx, 5xx, or none (the attempt sent the client nothing: a
//	    re-pick after definitely_not_sent, or the client left first). The
//	    sum without class="none" is requests by the backend that answered.
//	scootgate_model_tokens_total{model,backend,type}        counter
//	    Tokens the provider reported, as the usage event carries them:
//	    input (all, cached included), output (reasoning included),
//	    cache_read, cache_write, reasoning.
//	scootgate_model_ttfb_seconds{model,backend}             histogram
//	    Request sent to the provider's response headers, 2xx answers only.
//	    Buckets 100 ms to 60 s.
//	scootgate_model_stream_duration_seconds{model,backend}  histogram
//	    Streams relayed to the client (status 200): attempt start to end.
//	    Buckets 1 s to 20 min.
//	scootgate_model_cost_usd_total{model,backend}           counter
//	    What the attempts on priced targets cost, in US dollars, from the
//	    events' cost (docs/usage-events.md "Cost"): summed exactly in
//	    picodollars, converted to a float only when scraped. No series
//	    until a pair has cost something.
//	scootgate_model_request_bytes_total{model,backend}      counter  body bytes sent to the provider
//	scootgate_model_response_bytes_total{model,backend}     counter  body bytes read from the provider
//
// model is the public model name the routing table matched (a client's
// unknown model never reaches a label); backend the backend id. Each
// (model, backend) pair has 42 series. [Options.MaxModelSeries] (default
// [DefaultMaxModelSeries], 500 pairs, about 21,000 series) bounds the
// pairs with series of their own; the measurements of later pairs add up
// per backend under model="_other", so memory and scrape size stay
// bounded whatever the number of models. [Metrics.PruneModels] after a
// route swap frees the places of pairs the table no longer routes.
//
// # Backends (read from upstream.Registry at scrape time)
//
//	scootgate_backend_inflight{backend}                 gauge   requests in flight from this node
//	scootgate_backend_capacity{backend}                 gauge   max_inflight_per_node, the hard cap (docs/failures.md)
//	scootgate_backend_ttfb_estimate_seconds{backend}    gauge   the balancer's peak-EWMA TTFB estimate
//	scootgate_backend_breaker_state{backend}            gauge   0 closed, 1 open, 2 half-open
//	scootgate_backend_disabled{backend}                 gauge   1 after a provider 401/403 (docs/failures.md)
//	scootgate_backend_cooling{backend}                  gauge   1 during a 429 or quota cooldown (docs/failures.md)
//	scootgate_backend_slow_start_ratio{backend}         gauge   weight ramp, 0.1 to 1 (1 = fully ramped)
//	scootgate_backend_headroom_ratio{backend,budget}    gauge   share of the rate-limit budget (requests, tokens)
//	                                                            left, as the provider's headers last said less what
//	                                                            was sent since; absent while unknown (docs/routing.md)
//	scootgate_backend_headroom_exhausted{backend}       gauge   1 while held back for a used-up budget
//	scootgate_backend_ineligible_seconds_total{backend,reason}
//	                                                    counter time held back as scheduled: cooldown (429, quota)
//	                                                            or headroom (used-up budget; docs/failures.md)
//	scootgate_backend_ratelimit_headers_malformed_total{backend}
//	                                                    counter rate-limit header values ignored as unreadable
//
// # Snapshots (read from snapshot.Poller.Status at scrape time)
//
//	scootgate_snapshot_version{kind}                    gauge    applied version; 0 = none loaded
//	scootgate_snapshot_age_seconds{kind}                gauge    since the last successful contact with the
//	                                                             source (200, 304 or file read); absent before
//	                                                             the first, when scootgate_snapshot_stale tells
//	scootgate_snapshot_rejections_total{kind}           counter  documents fetched but not applied (decode,
//	                                                             validation, compile, rollback); a bad document
//	                                                             left published counts at every poll
//	scootgate_snapshot_signature_rejections_total{kind} counter  of those, documents not signed by a trusted key
//	                                                             (only with verify_keys; alert on any increase)
//	scootgate_snapshot_fetch_errors_total{kind}         counter  polls that could not fetch
//	scootgate_snapshot_stale{kind}                      gauge    1 when the source has been out of reach longer
//	                                                             than the staleness limit (docs/operations.md: not ready)
//
// # Outbox (read from outbox.Store.Stats at scrape time)
//
//	scootgate_outbox_depth                              gauge    events on disk not yet acknowledged by the broker
//	scootgate_outbox_bytes                              gauge    their payload bytes
//	scootgate_outbox_oldest_age_seconds                 gauge    age of the oldest; 0 when empty
//	scootgate_outbox_appended_total                     counter  events accepted
//	scootgate_outbox_dropped_total{reason}              counter  events refused, drop_newest (docs/usage-events.md): full (at
//	                                                             max events or bytes), queue (writer behind),
//	                                                             not_sent (a definitely-not-sent event beyond
//	                                                             its share of the crash window), failing (disk
//	                                                             errors), closed (after shutdown)
//	scootgate_outbox_committed_total                    counter  events written to disk
//	scootgate_outbox_deleted_total                      counter  events removed after delivery
//	scootgate_outbox_commits_total                      counter  write transactions, one fsync each
//	scootgate_outbox_quarantined                        gauge    1 when a corrupt file was moved aside at start
//	scootgate_outbox_unsynced                           gauge    events accepted, not yet on disk: what a crash loses
//	scootgate_outbox_unsynced_age_seconds               gauge    age of the oldest of them; 0 when none
//
// # MQTT (read from the publisher's stats at scrape time)
//
//	scootgate_mqtt_connected                            gauge    1 while a broker connection is up
//	scootgate_mqtt_published_total                      counter  events published at QoS 1, replays included
//	scootgate_mqtt_acked_total                          counter  events acknowledged (PUBACK) and deleted
//	scootgate_mqtt_reconnects_total                     counter  connections after the first
//	scootgate_mqtt_connect_failures_total               counter  failed connection attempts
//	scootgate_mqtt_oversize_total                       counter  events over the broker's payload limit, dropped
//	scootgate_mqtt_inflight                             gauge    publishes awaiting PUBACK
//
// # Usage recorder (read from usage.Recorder.Stats at scrape time)
//
//	scootgate_usage_events_total{result}                counter  recorded (handed to the outbox), dropped (the
//	                                                             outbox refused it), oversize (over the broker
//	                                                             limit), invalid (failed validation),
//	                                                             over_key_budget (cancelled before sending, beyond
//	                                                             the key's budget: counted, not recorded)
//
// # Caveats
//
// Series of a backend id stay exported after a route snapshot removes the
// backend, until the app calls [Metrics.ForgetBackend]. The scrape-time
// backend gauges follow the upstream registry, which prunes on its own.
//
// When a backend is redefined (a new base URL, credential or cap under
// the same id), the registry holds the old state too while requests
// pinned to the old table run, and until the next swap prunes it. The
// gauges show the definition the current table uses; only in-flight adds
// the old state's requests (see [Metrics.RegisterBackends]).
//
// Counters read from Stats functions restart at zero with the process,
// like every Prometheus counter; rate() handles it.
package metrics
