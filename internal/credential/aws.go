package credential

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/scootgate/scootgate/internal/secret"
)

// AWS is the key material of an aws credential (docs/egress.md
// "Credential kinds"): an access key id, its secret access key and, for
// temporary keys, a session token, each a secret reference that may
// rotate; and, when given, the one region its requests may be signed
// for. Immutable.
type AWS struct {
	AccessKeyID     secret.Secret
	SecretAccessKey secret.Secret
	SessionToken    secret.Secret // zero: long-term keys
	// Region, when not "", is the only region the keys are used in: a
	// backend of another region is refused at load.
	Region string

	// Minted is where each signature gets the keys of an aws_web_identity
	// credential (the source Credential.Mint makes, set by the node; the
	// static keys above are then zero); nil for static keys. When it has none to give, Sign fails with an error wrapping
	// ErrNoToken: nothing is sent, and the backend is not to blame.
	Minted Bearer `json:"-"`
}

// keys returns the keys to sign with now: the static ones, or the
// minted source's current ones.
func (a *AWS) keys(ctx context.Context) (aws.Credentials, error) {
	if a.Minted != nil {
		v, err := a.Minted.Token(ctx)
		if err != nil {
			return aws.Credentials{}, err
		}
		return decodeKeys(v)
	}
	return aws.Credentials{
		AccessKeyID:     a.AccessKeyID.Reveal(),
		SecretAccessKey: a.SecretAccessKey.Reveal(),
		SessionToken:    a.SessionToken.Reveal(),
	}, nil
}

// Signer returns the signer of requests to service in region with a's
// keys, signing with the time now returns.
func (a *AWS) Signer(service, region string, now func() time.Time) *SigV4 {
	return &SigV4{keys: a, service: service, region: region, now: now, signer: v4.NewSigner()}
}

// SigV4 signs provider requests with AWS Signature Version 4, by the AWS
// SDK's own signer. The keys are read at each signature, so that a
// rotated file or newly minted keys reach the next request. Safe for
// concurrent use.
type SigV4 struct {
	keys            *AWS
	service, region string
	now             func() time.Time
	signer          *v4.Signer
}

// ErrNoKeys is a signature asked of an aws credential whose keys are
// empty (a file emptied by a rotation in progress).
var ErrNoKeys = errors.New("credential: aws access key id or secret access key is empty")

// Sign signs r, whose body is the concatenation of body: the payload hash
// is computed over exactly those bytes, the ones the transport sends. It
// sets Authorization, X-Amz-Date and, with a session token,
// X-Amz-Security-Token. Errors never carry key material; minted keys
// that cannot be had now are an error wrapping ErrNoToken.
func (s *SigV4) Sign(r *http.Request, body [][]byte) error {
	creds, err := s.keys.keys(r.Context())
	if err != nil {
		return err
	}
	if creds.AccessKeyID == "" || creds.SecretAccessKey == "" {
		return ErrNoKeys
	}
	h := sha256.New()
	for _, p := range body {
		h.Write(p)
	}
	var sum [sha256.Size]byte
	if err := s.signer.SignHTTP(r.Context(), creds, r, hex.EncodeToString(h.Sum(sum[:0])), s.service, s.region, s.now()); err != nil {
		return fmt.Errorf("credential: sigv4: %w", err)
	}
	return nil
}
