package credential_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/secret"
)

// noTransport is a transport no construction test reaches.
var noTransport http.RoundTripper = http.NewFileTransport(http.Dir("/nonexistent"))

// keyWith returns the demo key file with member set to v (deleted when v
// is nil).
func keyWith(t *testing.T, w *world, member string, v any) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(w.google.KeyJSON("https://oauth2.googleapis.com/token"), &m); err != nil {
		t.Fatal(err)
	}
	if v == nil {
		delete(m, member)
	} else {
		m[member] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNewGCPServiceAccount(t *testing.T) {
	w := newWorld(t, 0)
	hosts := []string{"oauth2.googleapis.com"}
	pemKey := func() string {
		var m map[string]string
		_ = json.Unmarshal(w.google.KeyJSON(""), &m)
		return m["private_key"]
	}()
	tests := []struct {
		name    string
		key     string
		hosts   []string
		scopes  []string
		tr      http.RoundTripper
		wantErr string // the whole error; "" = none
	}{
		{name: "ok", key: keyWith(t, w, "token_uri", nil), hosts: hosts}, // token_uri defaults to Google's
		{name: "empty", key: "", wantErr: `credential "g": service-account key is empty`},
		{name: "not JSON", key: `{"private_key": "` + pemKey[:40], wantErr: `credential "g": service-account key is not JSON (syntax error at byte 45)`},
		{name: "not an object", key: `["x"]`, wantErr: `credential "g": service-account key is not a JSON object`},
		{name: "member of another type", key: keyWith(t, w, "client_email", 7), wantErr: `credential "g": service-account key member "client_email" is not a string`},
		{name: "user credentials", key: keyWith(t, w, "type", "authorized_user"),
			wantErr: `credential "g": service-account key: "type" is not "service_account" (a user or external-account credential file is not a service-account key)`},
		{name: "no email", key: keyWith(t, w, "client_email", nil), wantErr: `credential "g": service-account key: "client_email" is missing`},
		{name: "no key", key: keyWith(t, w, "private_key", nil), wantErr: `credential "g": service-account key: "private_key" is missing`},
		{name: "key not PEM", key: keyWith(t, w, "private_key", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"), wantErr: `credential "g": service-account key: "private_key" is not PEM`},
		{name: "key not RSA", key: keyWith(t, w, "private_key", strings.Replace(pemKey, "MII", "MIJ", 1)),
			wantErr: `credential "g": service-account key: "private_key" is not an RSA private key in PKCS #8 or PKCS #1`},
		{name: "no hosts", key: keyWith(t, w, "token_uri", nil),
			wantErr: `credential "g": token endpoint host "oauth2.googleapis.com" is not in credentials.g.hosts: the token endpoint is egress like the provider, list its host there`},
		{name: "wildcard hosts", key: keyWith(t, w, "token_uri", nil), hosts: []string{"*.googleapis.com"}},
		{name: "token_uri with userinfo", key: keyWith(t, w, "token_uri", "https://u:p@oauth2.googleapis.com/token"), hosts: hosts,
			wantErr: `credential "g": token endpoint URL is not an absolute https:// URL without userinfo`},
		{name: "metadata address", key: keyWith(t, w, "token_uri", "https://169.254.169.254/token"), hosts: []string{"169.254.169.254"},
			wantErr: `credential "g": token endpoint URL: link-local address; not allowed (cloud metadata services live there)`},
		{name: "metadata host", key: keyWith(t, w, "token_uri", "https://metadata.google.internal/token"), hosts: []string{"metadata.google.internal"},
			wantErr: `credential "g": token endpoint URL: cloud metadata service host; not allowed`},
		{name: "bad scope", key: keyWith(t, w, "token_uri", nil), hosts: hosts, scopes: []string{"a b"},
			wantErr: `credential "g": scope "a b" is not a scope (visible ASCII without spaces)`},
		{name: "no transport", key: keyWith(t, w, "token_uri", nil), hosts: hosts, tr: http.RoundTripper(nil),
			wantErr: `credential "g": no transport for the token endpoint (it is reached through the egress proxies; there is no direct connection)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := tt.tr
			if tt.name != "no transport" {
				tr = noTransport
			}
			ts, err := credential.NewGCPServiceAccount(credential.GCPOptions{
				TokenOptions: credential.TokenOptions{Name: "g", Hosts: tt.hosts, Transport: tr},
				Key:          secret.New(tt.key),
				Scopes:       tt.scopes,
			})
			if ts != nil {
				ts.Close()
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Fatalf("error = %q\nwant    %q", got, tt.wantErr)
			}
			checkNoSecrets(t, w, got)
		})
	}
}

func TestNewAzureEntra(t *testing.T) {
	hosts := []string{"login.microsoftonline.com"}
	tests := []struct {
		name    string
		o       credential.AzureOptions
		wantErr string
	}{
		{name: "ok", o: credential.AzureOptions{TenantID: entraTenant, ClientID: entraClient}},
		{name: "domain tenant", o: credential.AzureOptions{TenantID: "contoso.onmicrosoft.com", ClientID: entraClient}},
		{name: "sovereign cloud", o: credential.AzureOptions{TenantID: entraTenant, ClientID: entraClient, AuthorityHost: "https://login.microsoftonline.us"},
			wantErr: `credential "a": token endpoint host "login.microsoftonline.us" is not in credentials.a.hosts: the token endpoint is egress like the provider, list its host there`},
		{name: "tenant with a path", o: credential.AzureOptions{TenantID: "x/../y", ClientID: entraClient},
			wantErr: `credential "a": tenant id must be the directory's GUID or one of its domain names`},
		{name: "common", o: credential.AzureOptions{TenantID: "Common", ClientID: entraClient},
			wantErr: `credential "a": tenant id "Common" names no tenant; the client credentials grant needs the application's own tenant`},
		{name: "secret as client id", o: credential.AzureOptions{TenantID: entraTenant, ClientID: entraSecret},
			wantErr: `credential "a": client id must be the application (client) id, a GUID`},
		{name: "authority with a path", o: credential.AzureOptions{TenantID: entraTenant, ClientID: entraClient, AuthorityHost: "https://login.microsoftonline.com/tenant"},
			wantErr: `credential "a": authority host must be https://HOST[:PORT], without path or userinfo`},
		{name: "plaintext authority", o: credential.AzureOptions{TenantID: entraTenant, ClientID: entraClient, AuthorityHost: "http://login.microsoftonline.com"},
			wantErr: `credential "a": authority host must be https://HOST[:PORT], without path or userinfo`},
		{name: "bad scope", o: credential.AzureOptions{TenantID: entraTenant, ClientID: entraClient, Scopes: []string{""}},
			wantErr: `credential "a": scope "" is not a scope (visible ASCII without spaces)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			o.TokenOptions = credential.TokenOptions{Name: "a", Hosts: hosts, Transport: noTransport}
			o.ClientSecret = secret.New(entraSecret)
			ts, err := credential.NewAzureEntra(o)
			if ts != nil {
				ts.Close()
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Fatalf("error = %q\nwant    %q", got, tt.wantErr)
			}
			if strings.Contains(got, entraSecret) {
				t.Fatal("the error quotes the secret")
			}
		})
	}
	_, err := credential.NewAzureEntra(credential.AzureOptions{
		TokenOptions: credential.TokenOptions{Name: "a", Hosts: hosts, Transport: noTransport},
		TenantID:     entraTenant, ClientID: entraClient,
	})
	if err == nil || err.Error() != `credential "a": client secret is empty` {
		t.Fatalf("empty secret: %v", err)
	}
}
