package config

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/scootgate/scootgate/internal/secret"
)

// MQTT is where usage events are delivered (docs/usage-events.md "Delivery"). Broker "" turns
// delivery off: events still go to the outbox, which fills to its bound and
// then drops the newest (counted); the node logs this at start.
type MQTT struct {
	// Broker is tcp://host:port or ssl://host:port; "" = delivery off.
	Broker   string
	Topic    string // no wildcards
	Username string
	// Password is sent in CONNECT; only over ssl:// or to a loopback
	// broker (it would otherwise cross the network in cleartext).
	Password       secret.Secret
	CAFile         string        // PEM roots for an ssl:// broker; "" = system roots
	Window         int           // publishes in flight (PUBACK not yet seen)
	BatchMax       int           // events per message; 1 = one each, above 1 = newline-delimited batches to Topic + "/batch"
	MaxPayload     int           // larger events are deleted unpublished and counted; keep below the broker's limit
	KeepAlive      time.Duration // MQTT keepalive; a dead link is noticed within ~1.5× this
	ConnectTimeout time.Duration // dial + TLS + CONNECT/CONNACK
}

// Ranges of the [mqtt] keys (documented in the package doc).
const (
	maxMQTTWindow     = 65535     // MQTT packet identifiers
	maxMQTTBatch      = 1000      // events in one batched message
	maxMQTTPayload    = 255 << 20 // below MQTT's largest packet (268435455 bytes), with room for the topic
	maxMQTTString     = 65535     // MQTT UTF-8 string length
	minMQTTKeepAlive  = time.Second
	maxMQTTKeepAlive  = 65535 * time.Second // a 16-bit count of seconds
	maxMQTTConnect    = 10 * time.Minute
	defaultMQTTTopic  = "scootgate/usage"
	defaultMQTTWindow = 1024
)

// mqttSection reads [mqtt]; absent, every key keeps its default.
func (v *validator) mqttSection(root *table, m *MQTT) {
	if t, ok := section(root, "mqtt"); ok {
		v.mqtt(t, m)
	}
}

func (v *validator) mqtt(t *table, m *MQTT) {
	defer t.done()
	scheme, host := "", ""
	if raw, ok := t.str("broker", ""); ok && raw != "" {
		if u, ok := v.absURL(t.at("broker"), raw, "a tcp:// or ssl:// URL", "tcp", "ssl"); ok {
			switch {
			case u.User != nil:
				v.ps.add(t.at("broker"), "must not contain credentials; set username and password instead")
			case u.Path != "" && u.Path != "/":
				v.ps.add(t.at("broker"), "must not have a path; expected scheme://host:port")
			case u.Port() == "":
				v.ps.add(t.at("broker"), "missing port; expected scheme://host:port (1883 for tcp, 8883 for ssl)")
			default:
				m.Broker = u.Scheme + "://" + u.Host
				scheme, host = u.Scheme, u.Hostname()
			}
		}
	}
	if s, ok := t.str("topic", ""); ok {
		switch {
		case s == "":
			v.ps.add(t.at("topic"), "empty; expected a topic name like %q", defaultMQTTTopic)
		case strings.ContainsAny(s, "+#"):
			v.ps.add(t.at("topic"), "must not contain the wildcards + or #")
		case len(s) > maxMQTTString || strings.ContainsRune(s, 0) || !utf8.ValidString(s):
			v.ps.add(t.at("topic"), "expected UTF-8 without NUL, at most %d bytes", maxMQTTString)
		default:
			m.Topic = s
		}
	}
	username, userOK := t.str("username", "")
	switch {
	case !userOK:
	case len(username) > maxMQTTString:
		v.ps.add(t.at("username"), "too long; expected at most %d bytes", maxMQTTString)
	case strings.ContainsFunc(username, unicode.IsControl):
		v.ps.add(t.at("username"), "must not contain control characters")
	default:
		m.Username = username
	}
	if raw, ok := t.get("password", ""); ok {
		m.Password = v.secretRef(t, "password", raw)
		if username == "" && (userOK || !t.has("username")) {
			v.ps.add(t.at("username"), "missing; a password needs a username (MQTT 3.1.1 §3.1.2.9)")
		}
		if scheme == "tcp" && !loopback(host) {
			v.ps.add(t.at("password"), "would cross the network in cleartext to a non-loopback broker; "+
				"use an ssl:// broker or one on a loopback address")
		}
	}
	if f, ok := t.str("ca_file", ""); ok && f != "" {
		if scheme == "tcp" {
			v.ps.add(t.at("ca_file"), "only applies to ssl:// brokers")
		} else {
			m.CAFile = v.caFile(t, "ca_file", f)
		}
	}
	if n, ok := t.integer("window", "", 1, maxMQTTWindow); ok {
		m.Window = int(n)
	}
	if n, ok := t.integer("batch_max", "", 1, maxMQTTBatch); ok {
		m.BatchMax = int(n)
	}
	if n, ok := t.integer("max_payload", "", 1, maxMQTTPayload); ok {
		m.MaxPayload = int(n)
	}
	v.durationRange(t, "keepalive", minMQTTKeepAlive, maxMQTTKeepAlive, &m.KeepAlive)
	v.durationRange(t, "connect_timeout", minTimeout, maxMQTTConnect, &m.ConnectTimeout)
	if m.KeepAlive%time.Second != 0 {
		v.ps.add(t.at("keepalive"), "%s is not a whole number of seconds (MQTT counts keepalive in seconds)", m.KeepAlive)
	}
}

// durationRange reads the optional duration at key into *dst when it lies
// in [lo, hi].
func (v *validator) durationRange(t *table, key string, lo, hi time.Duration, dst *time.Duration) {
	d, ok := t.duration(key, lo)
	switch {
	case !ok:
	case d > hi:
		v.ps.add(t.at(key), "%s is too large; expected at most %s", d, hi)
	default:
		*dst = d
	}
}
