package credential

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"golang.org/x/oauth2"

	"github.com/scootgate/scootgate/internal/secret"
)

// KindAWSWebIdentity is the aws_web_identity credential kind: temporary
// AWS keys for a role, obtained from AWS STS with a web identity token
// (docs/egress.md "aws_web_identity"), as Kubernetes workload identity
// on EKS (IRSA) hands them to a pod: a role ARN and a projected service
// account token file.
const KindAWSWebIdentity = "aws_web_identity"

// DefaultRoleSessionName is the role session name when none is
// configured: it names the node in the role's CloudTrail events.
const DefaultRoleSessionName = "scootgate"

// roleSessionName is STS's rule for a role session name.
var roleSessionName = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)

// roleARN is the shape of an IAM role ARN (any partition).
var roleARN = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}$`)

// AWSWebIdentityOptions configure an aws_web_identity credential.
type AWSWebIdentityOptions struct {
	TokenOptions
	// RoleARN is the IAM role to assume ("arn:aws:iam::123456789012:role/x").
	RoleARN string
	// TokenFile is the web identity token's file (on EKS,
	// /var/run/secrets/eks.amazonaws.com/serviceaccount/token). It is read
	// at every grant: the kubelet rotates it.
	TokenFile string
	// RoleSessionName names the session; "" = DefaultRoleSessionName.
	RoleSessionName string
	// STSEndpoint is STS's https:// URL, reached through the egress
	// proxies and one of Hosts ("https://sts.us-east-1.amazonaws.com").
	STSEndpoint string
	// Region is the region of the STS client; "" = us-east-1 (it only
	// names the endpoint's region: the request is not signed).
	Region string
}

// NewAWSWebIdentity returns a minted credential whose value is the
// temporary keys of o.RoleARN, obtained from STS by
// AssumeRoleWithWebIdentity (the AWS SDK's stscreds provider and STS
// client, on the egress transport) and replaced ahead of their
// expiration like a minted token (TokenSource). The keys it hands out
// are for AWS.Signer, never a header: see [AWS.Minted]. Errors name the
// credential and the problem, never a token or key.
func NewAWSWebIdentity(o AWSWebIdentityOptions) (*TokenSource, error) {
	if !roleARN.MatchString(o.RoleARN) {
		return nil, fmt.Errorf("credential %q: role_arn is not an IAM role ARN like \"arn:aws:iam::123456789012:role/NAME\"", o.Name)
	}
	if o.TokenFile == "" {
		return nil, fmt.Errorf("credential %q: no web identity token file", o.Name)
	}
	session := o.RoleSessionName
	if session == "" {
		session = DefaultRoleSessionName
	}
	if !roleSessionName.MatchString(session) {
		return nil, fmt.Errorf("credential %q: role_session_name must be 2-64 of letters, digits and _+=,.@-", o.Name)
	}
	region := o.Region
	if region == "" {
		region = "us-east-1"
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return newTokenSource(awsWebKind{
		role: o.RoleARN, tokenFile: o.TokenFile, session: session,
		endpoint: o.STSEndpoint, region: region, now: now,
	}, o.TokenOptions)
}

// STSEndpoint is the regional STS endpoint of region, or the global one
// for "".
func STSEndpoint(region string) string {
	if region == "" {
		return "https://sts.amazonaws.com"
	}
	return "https://sts." + region + ".amazonaws.com"
}

// awsWebKind is the aws_web_identity kind. Immutable.
type awsWebKind struct {
	role, tokenFile, session string
	endpoint, region         string
	now                      func() time.Time
}

func (awsWebKind) name() string { return KindAWSWebIdentity }

// detail: STS's messages carry no documented error number (its code is
// the GrantError's Code).
func (awsWebKind) detail(string) string { return "" }

func (k awsWebKind) prepare() (string, func(context.Context, *http.Client) (*oauth2.Token, error), error) {
	if u, err := url.Parse(k.endpoint); err != nil || u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return "", nil, errors.New("sts_endpoint is not a URL without path or query like \"https://sts.us-east-1.amazonaws.com\"")
	}
	token, err := os.ReadFile(k.tokenFile)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is quoted below
		}
		return "", nil, fmt.Errorf("web identity token file %q: %w", k.tokenFile, err)
	}
	if token = []byte(strings.TrimSpace(string(token))); len(token) == 0 {
		return "", nil, fmt.Errorf("web identity token file %q is empty", k.tokenFile)
	}
	mint := func(ctx context.Context, hc *http.Client) (*oauth2.Token, error) {
		client := sts.New(sts.Options{
			Region:       k.region,
			BaseEndpoint: aws.String(k.endpoint),
			HTTPClient:   hc,
			// One request per grant: the TokenSource's backoff retries.
			Retryer: aws.NopRetryer{},
		})
		p := stscreds.NewWebIdentityRoleProvider(client, k.role, identityToken(token), func(o *stscreds.WebIdentityRoleOptions) {
			o.RoleSessionName = k.session
		})
		creds, err := p.Retrieve(ctx)
		if err != nil {
			return nil, stsError(err)
		}
		value, err := encodeKeys(creds)
		if err != nil {
			return nil, err
		}
		life := creds.Expires.Sub(k.now())
		return &oauth2.Token{AccessToken: value, TokenType: "Bearer", ExpiresIn: int64(life / time.Second)}, nil
	}
	return k.endpoint, mint, nil
}

// identityToken is the token read when the grant was prepared.
type identityToken []byte

func (t identityToken) GetIdentityToken() ([]byte, error) { return t, nil }

// stsError makes STS's refusal the grant's: its status and its error
// code (InvalidIdentityToken, AccessDenied, ExpiredTokenException…),
// never its message. Other errors (transport, decoding) pass: the
// exchange reports them by its own facts.
func stsError(err error) error {
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil || re.Response.Response == nil {
		return err
	}
	e := &oauth2.RetrieveError{Response: re.Response.Response}
	if ae, ok := errors.AsType[smithy.APIError](err); ok {
		e.ErrorCode = ae.ErrorCode()
	}
	return e
}

// The keys travel inside the TokenSource as one value: the access key id,
// the secret access key and the session token joined by ':', which none
// of them contains (STS issues them in base64 and [A-Z0-9] alphabets).
const keySep = ":"

func encodeKeys(c aws.Credentials) (string, error) {
	for _, v := range []string{c.AccessKeyID, c.SecretAccessKey, c.SessionToken} {
		if v == "" || strings.Contains(v, keySep) || !headerSafe(v) {
			return "", errors.New("sts issued keys that are empty or not of AWS's alphabet")
		}
	}
	return c.AccessKeyID + keySep + c.SecretAccessKey + keySep + c.SessionToken, nil
}

func decodeKeys(v secret.Secret) (aws.Credentials, error) {
	id, rest, ok1 := strings.Cut(v.Reveal(), keySep)
	key, session, ok2 := strings.Cut(rest, keySep)
	if !ok1 || !ok2 || id == "" || key == "" || session == "" {
		return aws.Credentials{}, ErrNoKeys
	}
	return aws.Credentials{AccessKeyID: id, SecretAccessKey: key, SessionToken: session}, nil
}
