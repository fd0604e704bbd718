// Package jsonedit reads and edits the top-level members of a JSON object
// without re-marshalling it.
//
// docs/api.md: before forwarding, the gateway rewrites the top-level "model"
// member to the target's provider model, and "the rest of the body must reach
// the provider byte-for-byte (no re-marshalling of the whole document;
// unknown fields survive)". Decoding into a map and encoding again would
// reorder keys, normalise numbers and string escapes, and drop duplicates, so
// this package edits the bytes in place instead.
//
// # Basics
//
// One hand-written scanner walks the top level of the document once. It
// validates everything it walks over (strings, escapes, numbers, literals and
// nested objects and arrays) with the grammar of RFC 8259 as implemented by
// encoding/json, so an object this package accepts is one encoding/json
// accepts, and the other way round (FuzzReplace checks both directions). Nested containers are skipped with an
// explicit stack, never by recursion, and are bounded at encoding/json's own
// nesting limit of 10000.
//
// Keys are compared after unescaping, with encoding/json's rules (a lone
// surrogate or invalid UTF-8 reads as U+FFFD), so "mod\u0065l" is the key
// "model". Only top-level members are considered: a "model" key inside a
// nested object or array is data and is never touched.
//
//   - [Lookup] returns the raw value of the last member with the key, which is
//     the value encoding/json (and most JSON parsers) would keep.
//   - [Replace] replaces the value of every member with the key, so a
//     duplicate key cannot carry a second model past the gateway to a
//     provider whose parser keeps the first one.
//   - [Insert] adds a member at the end of the object, after the last
//     existing member.
//   - [Members] iterates over the members in document order, for a caller
//     that needs several of them from one pass. [Member.KeyIs] compares keys
//     as Lookup does, [Member.KeyFold] as encoding/json matches struct
//     fields; [Unquote] and [EqualString] decode string values.
//     [Iter.NextKey] stops at a member's value, so that [Iter.Object] can
//     read the members of a nested object in the same pass.
//
// Every byte outside the edited values is copied unchanged, including
// whitespace and the order of members. Edits return a new slice, sized
// exactly, and never modify their input.
//
// # Caveats
//
// Key comparison is exact, as in encoding/json when decoding into a map.
// Decoding into a Go struct matches field names case-insensitively, so a
// caller that inspects a body through a struct must not assume it sees the
// same member Lookup does; Member.KeyFold reproduces the struct rule.
//
// The value given to Replace or Insert is validated as one JSON value but
// otherwise inserted as given; encode it with encoding/json (or
// strconv.Quote for ASCII strings) first.
package jsonedit
