// Package snapsign signs and verifies ScootGate snapshots with the Dead
// Simple Signing Envelope (DSSE, github.com/secure-systems-lab/dsse, the
// envelope of in-toto and Sigstore) and ed25519. It is for control-plane
// authors as much as for the node: standard library only, no I/O.
//
// # Basics
//
// An envelope is a JSON object:
//
//	{
//	  "payloadType": "application/vnd.scootgate.routes+json",
//	  "payload":     "<base64 of the snapshot's exact bytes>",
//	  "signatures":  [{"keyid": "<hint>", "sig": "<base64 ed25519 signature>"}]
//	}
//
// Each signature is ed25519 over [PAE](payloadType, payload): the payload
// type is signed with the bytes, so a routing snapshot can never be taken
// for an authorization snapshot ([RoutesPayloadType], [AuthzPayloadType]).
// The keyid is an unauthenticated hint: [Verify] tries every trusted key
// against every signature and never trusts a key because of its keyid.
// Any standard DSSE signer produces envelopes Verify accepts (standard or
// URL-safe base64, padded or not, unknown members ignored), and [Sign]
// produces envelopes any standard DSSE verifier accepts. [Decode] reads
// member names exactly: a name twice in one object, or beside a twin in
// another letter case ("Payload", "Sig"), is an error, since a reader
// that decodes into a struct would read the twin, and so another envelope.
//
// Keys are PEM, as OpenSSL writes them: a PKCS#8 "PRIVATE KEY" block
// (openssl genpkey -algorithm ed25519) and a PKIX "PUBLIC KEY" block
// (openssl pkey -pubout). [KeyID] is the lowercase hex SHA-256 of the
// public key's DER form, which
//
//	openssl pkey -pubin -in key.pub -outform DER | sha256sum
//
// prints as well.
//
// # Caveats
//
// A verified envelope proves that a holder of a trusted private key signed
// these bytes, not that they are the newest ones: an attacker who controls
// the transport can replay an older signed document. The node's version
// floor (it never applies a version below the highest it has applied)
// limits that to holding a node on what it already has.
package snapsign
