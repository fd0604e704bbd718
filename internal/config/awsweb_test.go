package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAWSWebIdentity: the aws_web_identity kind (docs/egress.md
// "aws_web_identity") is checked at load as the node will build it: a
// role ARN, a readable token file, STS's host in hosts; it serves Bedrock
// backends only, like aws keys.
func TestAWSWebIdentity(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("eyJ.web-identity.sig"), 0o600); err != nil {
		t.Fatal(err)
	}
	const hosts = `hosts = ["api.example.com", "sts.us-east-1.amazonaws.com"]`
	cred := func(extra string) string {
		return "kind = \"aws_web_identity\"\nrole_arn = \"arn:aws:iam::123456789012:role/node\"\nweb_identity_token_file = \"" + tokenFile + "\"\nregion = \"us-east-1\"\n" + extra
	}
	bedrock := func(doc string) string { return edit(t, doc, bedrockBackend...) }
	firstParty := func(doc string) string { return doc }
	tests := []struct {
		name, cred string
		backend    func(string) string
		want       []Problem
	}{
		{"regional STS", cred(hosts), bedrock, nil},
		{"session name and endpoint", cred("role_session_name = \"node-1\"\nsts_endpoint = \"https://sts.amazonaws.com\"\n" + `hosts = ["api.example.com", "sts.amazonaws.com"]`), bedrock, nil},
		{"STS outside hosts", cred(`hosts = ["api.example.com"]`), bedrock,
			[]Problem{{"credentials.c1", `token endpoint host "sts.us-east-1.amazonaws.com" is not in credentials.c1.hosts: the token endpoint is egress like the provider, list its host there`}}},
		{"missing members, static keys", "kind = \"aws_web_identity\"\naccess_key_id = { env = \"C1\" }\n" + hosts, bedrock,
			[]Problem{
				{"credentials.c1.role_arn", `missing; required for kind "aws_web_identity"`},
				{"credentials.c1.web_identity_token_file", `missing; required for kind "aws_web_identity"`},
				{"credentials.c1.access_key_id", `does not apply to kind "aws_web_identity": its keys are role_arn, web_identity_token_file, role_session_name, region and sts_endpoint`},
			}},
		{"no token file", strings.Replace(cred(hosts), tokenFile, tokenFile+".missing", 1), bedrock,
			[]Problem{{"credentials.c1", `web identity token file "` + tokenFile + `.missing": no such file or directory`}}},
		{"on a first-party backend", cred(hosts), firstParty,
			[]Problem{{"backends.b1.credential", `backend "b1" uses aws credential "c1", but only platform "bedrock" takes AWS-signed requests`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := tt.backend(edit(t, base, credEnv+"\n"+credHosts, tt.cred))
			c, err := Parse([]byte(doc), ruleEnv(), fakeFS(nil))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v\n%s", err, doc)
				}
				cr := c.Credentials["c1"]
				if cr.Mint == nil || cr.AWS == nil || cr.AWS.Region != "us-east-1" || !cr.Secret.IsZero() || !cr.AWS.AccessKeyID.IsZero() {
					t.Fatalf("credential %+v: want minted AWS keys for us-east-1", cr)
				}
				return
			}
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Parse = %v, want a *config.Error\n%s", err, doc)
			}
			if diff := cmp.Diff(cerr.Problems, tt.want); diff != "" {
				t.Errorf("problems (-got +want):\n%s", diff)
			}
		})
	}
}
