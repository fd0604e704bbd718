package faketoken

import (
	"crypto/subtle"
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// STSKeys are the temporary keys a fake STS issues: the ones the fake
// provider's Bedrock paths accept.
type STSKeys struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

// STSOptions configure a fake AWS STS.
type STSOptions struct {
	Options
	// RoleARN is the role a grant may assume; another is AccessDenied.
	RoleARN string
	// Token is the web identity token accepted; another is
	// InvalidIdentityToken.
	Token string
	// Keys are what every grant issues, with an Expiration Lifetime
	// after the grant.
	Keys STSKeys
}

// STS stands in for AWS STS's AssumeRoleWithWebIdentity (the query
// protocol: a form POST with Action and Version, an XML answer), as
// EKS workload identity uses it: an unsigned request carrying the role
// ARN, a session name and the web identity token. Errors have STS's
// shape (<ErrorResponse><Error><Code>…). Safe for concurrent use.
type STS struct {
	o   STSOptions
	now func() time.Time

	mu     sync.Mutex
	grants int // guarded by mu
	fail   int // guarded by mu
}

// NewSTS returns a fake STS endpoint.
func NewSTS(o STSOptions) *STS {
	s := &STS{o: o, now: o.Now}
	if s.now == nil {
		s.now = time.Now
	}
	if s.o.Lifetime <= 0 {
		s.o.Lifetime = DefaultLifetime
	}
	return s
}

// Grants returns how many sets of keys were issued.
func (s *STS) Grants() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grants
}

// Fail makes every grant answer status (ServiceUnavailable) until Fail(0).
func (s *STS) Fail(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = status
}

func (s *STS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	failing := s.fail
	s.mu.Unlock()
	switch {
	case failing != 0:
		stsError(w, failing, "Receiver", "ServiceUnavailable", "the fake STS is failing on purpose")
		return
	case r.Method != http.MethodPost:
		stsError(w, http.StatusMethodNotAllowed, "Sender", "InvalidAction", "STS takes a POST")
		return
	case r.Header.Get("Authorization") != "":
		// AssumeRoleWithWebIdentity is unsigned: a node that signs it
		// would be sending keys it should not have.
		stsError(w, http.StatusBadRequest, "Sender", "InvalidRequest", "the fake STS expects an unsigned AssumeRoleWithWebIdentity")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		stsError(w, http.StatusBadRequest, "Sender", "MalformedInput", "the body is not a form")
		return
	}
	f := r.PostForm
	switch {
	case f.Get("Action") != "AssumeRoleWithWebIdentity" || f.Get("Version") != "2011-06-15":
		stsError(w, http.StatusBadRequest, "Sender", "InvalidAction", "Could not find operation "+f.Get("Action")+" for version "+f.Get("Version"))
		return
	case f.Get("RoleSessionName") == "":
		stsError(w, http.StatusBadRequest, "Sender", "ValidationError", "1 validation error detected: Value null at 'roleSessionName' failed to satisfy constraint: Member must not be null")
		return
	case subtle.ConstantTimeCompare([]byte(f.Get("WebIdentityToken")), []byte(s.o.Token)) != 1:
		stsError(w, http.StatusBadRequest, "Sender", "InvalidIdentityToken", "Couldn't retrieve verification key from your identity provider")
		return
	case f.Get("RoleArn") != s.o.RoleARN:
		stsError(w, http.StatusForbidden, "Sender", "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity")
		return
	}
	s.mu.Lock()
	s.grants++
	n := s.grants
	s.mu.Unlock()
	type creds struct {
		AccessKeyID     string `xml:"AccessKeyId"`
		SecretAccessKey string `xml:"SecretAccessKey"`
		SessionToken    string `xml:"SessionToken"`
		Expiration      string `xml:"Expiration"`
	}
	type result struct {
		Credentials     creds  `xml:"Credentials"`
		Provider        string `xml:"Provider"`
		AssumedRoleUser struct {
			Arn           string `xml:"Arn"`
			AssumedRoleID string `xml:"AssumedRoleId"`
		} `xml:"AssumedRoleUser"`
	}
	var out struct {
		XMLName   xml.Name `xml:"https://sts.amazonaws.com/doc/2011-06-15/ AssumeRoleWithWebIdentityResponse"`
		Result    result   `xml:"AssumeRoleWithWebIdentityResult"`
		RequestID string   `xml:"ResponseMetadata>RequestId"`
	}
	out.Result.Credentials = creds{s.o.Keys.AccessKeyID, s.o.Keys.SecretAccessKey, s.o.Keys.SessionToken,
		s.now().Add(s.o.Lifetime).UTC().Format(time.RFC3339)}
	out.Result.Provider = "oidc.eks.us-east-1.amazonaws.com/id/FAKE"
	out.Result.AssumedRoleUser.Arn = strings.Replace(strings.Replace(s.o.RoleARN, ":iam::", ":sts::", 1), ":role/", ":assumed-role/", 1) + "/" + f.Get("RoleSessionName")
	out.Result.AssumedRoleUser.AssumedRoleID = "AROAFAKE:" + f.Get("RoleSessionName")
	out.RequestID = fmt.Sprintf("fake-sts-%06d", n)
	writeXML(w, http.StatusOK, out)
}

// stsError answers STS's error document.
func stsError(w http.ResponseWriter, status int, typ, code, msg string) {
	var doc struct {
		XMLName xml.Name `xml:"https://sts.amazonaws.com/doc/2011-06-15/ ErrorResponse"`
		Error   struct {
			Type    string `xml:"Type"`
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		} `xml:"Error"`
		RequestID string `xml:"RequestId"`
	}
	doc.Error.Type, doc.Error.Code, doc.Error.Message = typ, code, msg
	doc.RequestID = "fake-sts-error"
	writeXML(w, status, doc)
}

func writeXML(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(v)
}
