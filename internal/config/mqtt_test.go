package config

import (
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/secret"
)

func TestRulesMQTT(t *testing.T) {
	view := func(c *Config) any { return c.MQTT }
	def := Defaults().MQTT
	with := func(f func(m *MQTT)) MQTT {
		m := def
		f(&m)
		return m
	}
	runRules(t, []ruleCase{
		{name: "absent: delivery off, defaults", view: view, wantView: def},
		{
			name: "every key set",
			add: "[mqtt]\nbroker = \"ssl://mqtt.example.com:8883/\"\ntopic = \"fleet/a/usage\"\nusername = \"u\"\n" +
				"password = { env = \"PROXY_PW\" }\nca_file = \"/ca.pem\"\nwindow = 1024\nbatch_max = 200\nmax_payload = 65536\n" +
				"keepalive = \"1m\"\nconnect_timeout = \"3s\"\n",
			view: view,
			wantView: MQTT{
				Broker: "ssl://mqtt.example.com:8883", Topic: "fleet/a/usage", Username: "u", Password: secret.New("pw"),
				CAFile: "/ca.pem", Window: 1024, BatchMax: 200, MaxPayload: 65536, KeepAlive: time.Minute, ConnectTimeout: 3 * time.Second,
			},
		},
		{
			name:     "password to a loopback tcp broker",
			add:      "[mqtt]\nbroker = \"tcp://127.0.0.1:1883\"\nusername = \"u\"\npassword = { env = \"PROXY_PW\" }\n",
			view:     view,
			wantView: with(func(m *MQTT) { m.Broker, m.Username, m.Password = "tcp://127.0.0.1:1883", "u", secret.New("pw") }),
		},
		{
			name:     "empty broker is delivery off",
			add:      "[mqtt]\nbroker = \"\"\n",
			view:     view,
			wantView: def,
		},
		{
			name: "bad brokers",
			add:  "[mqtt]\nbroker = \"mqtt://127.0.0.1:1883\"\n",
			want: []Problem{{"mqtt.broker", "expected a tcp:// or ssl:// URL"}},
		},
		{
			name: "broker without port",
			add:  "[mqtt]\nbroker = \"tcp://127.0.0.1\"\n",
			want: []Problem{{"mqtt.broker", "missing port; expected scheme://host:port (1883 for tcp, 8883 for ssl)"}},
		},
		{
			name: "broker with credentials",
			add:  "[mqtt]\nbroker = \"tcp://u:secretpw@127.0.0.1:1883\"\n",
			want: []Problem{{"mqtt.broker", "must not contain credentials; set username and password instead"}},
		},
		{
			name: "cleartext password to a remote broker, no username",
			add:  "[mqtt]\nbroker = \"tcp://mqtt.example.com:1883\"\npassword = { env = \"PROXY_PW\" }\n",
			want: []Problem{
				{"mqtt.username", "missing; a password needs a username (MQTT 3.1.1 §3.1.2.9)"},
				{"mqtt.password", "would cross the network in cleartext to a non-loopback broker; use an ssl:// broker or one on a loopback address"},
			},
		},
		{
			name: "password is a reference, never a string",
			add:  "[mqtt]\nusername = \"u\"\npassword = \"hunter2\"\n",
			want: []Problem{{"mqtt.password", `expected a secret reference { env = "NAME" } or { file = "PATH" }, got a string`}},
		},
		{
			name: "out of range and malformed",
			add: "[mqtt]\nbroker = \"tcp://127.0.0.1:1883\"\ntopic = \"usage/#\"\nca_file = \"/ca.pem\"\nwindow = 0\nbatch_max = 1001\n" +
				"max_payload = 267386881\nkeepalive = \"1500ms\"\nconnect_timeout = \"11m\"\nqos = 2\n",
			want: []Problem{
				{"mqtt.topic", "must not contain the wildcards + or #"},
				{"mqtt.ca_file", "only applies to ssl:// brokers"},
				{"mqtt.window", "0 is out of range; expected 1..65535"},
				{"mqtt.batch_max", "1001 is out of range; expected 1..1000"},
				{"mqtt.max_payload", "267386881 is out of range; expected 1..267386880"},
				{"mqtt.connect_timeout", "11m0s is too large; expected at most 10m0s"},
				{"mqtt.keepalive", "1.5s is not a whole number of seconds (MQTT counts keepalive in seconds)"},
				{"mqtt.qos", "unknown key; expected one of: batch_max, broker, ca_file, connect_timeout, keepalive, max_payload, password, topic, username, window"},
			},
		},
		{
			name: "empty topic, sub-second keepalive",
			add:  "[mqtt]\ntopic = \"\"\nkeepalive = \"0s\"\n",
			want: []Problem{
				{"mqtt.topic", `empty; expected a topic name like "scootgate/usage"`},
				{"mqtt.keepalive", "0s is too small; expected at least 1s"},
			},
		},
	})
}

// TestMQTTPasswordNeverInProblems: a password pasted as a string is
// described by its type only.
func TestMQTTPasswordNeverInProblems(t *testing.T) {
	const canary = "mqtt-CANARY-5d1e"
	doc := base + "[mqtt]\nbroker = \"tcp://u:" + canary + "@127.0.0.1:1883\"\nusername = \"u\"\npassword = \"" + canary + "\"\n"
	_, err := Parse([]byte(doc), ruleEnv(), ruleFS())
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	if strings.Contains(err.Error(), canary) {
		t.Errorf("problems contain the password: %v", err)
	}
}
