package config

import (
	"strconv"
	"strings"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/pkg/routesnap"
)

// awsWebIdentity reads an aws_web_identity credential (docs/egress.md
// "aws_web_identity"): role_arn and web_identity_token_file (required),
// role_session_name, region (the only region its keys sign for, and
// STS's) and sts_endpoint (default: region's STS endpoint). It checks
// them as the node will build the source of the keys, the token file and
// the STS endpoint's host against hosts included; the node makes it once
// it has its egress transport (Mint) and signs with its keys. A static
// credential's env, file and auth_header, and an aws credential's keys,
// do not apply.
func (v *validator) awsWebIdentity(name string, t *table, hosts []string) credential.Credential {
	defer t.done()
	before := len(v.ps.list)
	str := func(key string, required bool) string { return v.kindString(t, kindAWSWeb, key, required) }
	role := str("role_arn", true)
	tokenFile := v.resolve(str("web_identity_token_file", true))
	session := str("role_session_name", false)
	region := str("region", false)
	if region != "" && !routesnap.ValidRegion(region) {
		v.ps.add(t.at("region"), `expected an AWS region like "us-east-1"`)
	}
	endpoint := str("sts_endpoint", false)
	if endpoint == "" {
		endpoint = credential.STSEndpoint(region)
	}
	for _, k := range []string{"env", "file", "auth_header", "access_key_id", "secret_access_key", "session_token"} {
		if t.has(k) {
			v.ps.add(t.at(k), "does not apply to kind %q: its keys are role_arn, web_identity_token_file, role_session_name, region and sts_endpoint", kindAWSWeb)
		}
	}
	mint := func(o credential.TokenOptions) (*credential.TokenSource, error) {
		return credential.NewAWSWebIdentity(credential.AWSWebIdentityOptions{
			TokenOptions: o, RoleARN: role, TokenFile: tokenFile, RoleSessionName: session,
			STSEndpoint: endpoint, Region: region,
		})
	}
	c := credential.Credential{Hosts: hosts, Mint: mint, AWS: &credential.AWS{Region: region}}
	if len(v.ps.list) > before || v.badHosts[t.path] {
		return c
	}
	// The checks the node makes when it builds the source; no grant is
	// made.
	if _, err := mint(credential.TokenOptions{Name: name, Hosts: hosts, Transport: noTransport{}}); err != nil {
		msg, _ := strings.CutPrefix(err.Error(), "credential "+strconv.Quote(name)+": ")
		v.ps.add(t.path, "%s", msg)
	}
	return c
}
