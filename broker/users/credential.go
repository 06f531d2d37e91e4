// Package users keeps SASL/SCRAM credentials in the coordination store, the
// way Kafka kept them in ZooKeeper, and caches them on every broker.
//
// Store layout (Kafka's, so the data reads the same to anyone who knew it):
//
//	/config/users/<sanitized name>   {"version":1,"config":{"SCRAM-SHA-512":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>"}}
//	/config/changes/config_change_<seq>  {"version":2,"entity_path":"users/<sanitized name>"}
//
// A user's node holds one entry per SCRAM mechanism. Only the salt, the
// iteration count and the two keys RFC 5802 derives from the salted password
// are stored, never the password: the stored key lets the broker check a
// client's proof, the server key lets it prove itself to the client, and
// neither lets anyone log in. Every write also creates a change
// notification, which every broker's Cache watches to reload.
//
// The derivation (PBKDF2, HMAC, hash) is github.com/xdg-go/scram's; this
// package only stores and compares its results.
package users

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/xdg-go/scram"
)

// SCRAM mechanisms, in Kafka's spelling.
const (
	SCRAMSHA256 = "SCRAM-SHA-256"
	SCRAMSHA512 = "SCRAM-SHA-512"
)

// Mechanisms are the SCRAM mechanisms a credential can be stored for.
var Mechanisms = []string{SCRAMSHA256, SCRAMSHA512}

// Iteration bounds, Kafka's: fewer than 4096 PBKDF2 rounds make a stolen
// credential cheap to attack; more than 16384 make every authentication
// (and every PLAIN login, which derives the key again) slow for little gain.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// MaxNameBytes bounds a user name. Names come from clients (SASL messages,
// AlterUserScramCredentials) and become store node names and log fields.
const MaxNameBytes = 255

// MaxSaltBytes bounds a salt a client supplies (AlterUserScramCredentials);
// generated salts are saltBytes long.
const MaxSaltBytes = 256

// saltBytes is the length of a generated salt; Kafka's is 32 random bytes
// too (RFC 5802 asks only for a random one).
const saltBytes = 32

// maxEncodedBytes bounds one stored credential string before it is parsed:
// a 64-byte key in base64 is 88 bytes, so 1 KiB is far beyond any valid one.
const maxEncodedBytes = 1024

// ErrInvalid marks a bad name, mechanism, iteration count or stored
// credential, as opposed to a store failure.
var ErrInvalid = errors.New("users: invalid")

// Hash returns the hash function of a SCRAM mechanism.
func Hash(mechanism string) (scram.HashGeneratorFcn, bool) {
	switch mechanism {
	case SCRAMSHA256:
		return scram.SHA256, true
	case SCRAMSHA512:
		return scram.SHA512, true
	}
	return nil, false
}

// CheckName reports whether name can be a user: 1 to MaxNameBytes bytes of
// UTF-8 without control characters, and not "." or "..", which cannot be
// store node names.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty user name", ErrInvalid)
	case len(name) > MaxNameBytes:
		return fmt.Errorf("%w: user name of %d bytes is longer than %d", ErrInvalid, len(name), MaxNameBytes)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: user name is not UTF-8", ErrInvalid)
	case name == "." || name == "..":
		return fmt.Errorf("%w: user name %q", ErrInvalid, name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: user name has a control character", ErrInvalid)
		}
	}
	return nil
}

// CheckIterations reports whether n is within Kafka's bounds.
func CheckIterations(n int) error {
	if n < MinIterations || n > MaxIterations {
		return fmt.Errorf("%w: %d iterations is outside %d to %d", ErrInvalid, n, MinIterations, MaxIterations)
	}
	return nil
}

// Credential is what is stored for one user and one SCRAM mechanism.
type Credential struct {
	Mechanism  string
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int
}

// NewCredential derives a credential for password with a fresh random salt.
func NewCredential(mechanism, password string, iterations int) (Credential, error) {
	salt := make([]byte, saltBytes)
	if _, err := rand.Read(salt); err != nil {
		return Credential{}, err
	}
	return Derive(mechanism, password, salt, iterations)
}

// Derive computes the credential of password with the given salt and
// iteration count. The password is used as given, without SASLprep, as
// Kafka and its clients do, so a password accepted by one is accepted by
// the other.
func Derive(mechanism, password string, salt []byte, iterations int) (Credential, error) {
	hash, ok := Hash(mechanism)
	if !ok {
		return Credential{}, fmt.Errorf("%w: mechanism %q is not one of %s", ErrInvalid, mechanism, strings.Join(Mechanisms, ", "))
	}
	if err := CheckIterations(iterations); err != nil {
		return Credential{}, err
	}
	return derive(hash, mechanism, password, salt, iterations)
}

// derive is Derive without the mechanism and bounds checks, for tests
// against published vectors (SHA-1, fewer iterations).
func derive(hash scram.HashGeneratorFcn, mechanism, password string, salt []byte, iterations int) (Credential, error) {
	client, err := hash.NewClientUnprepped("", password, "")
	if err != nil {
		return Credential{}, err
	}
	sc, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iterations})
	if err != nil {
		return Credential{}, err
	}
	return Credential{Mechanism: mechanism, Salt: append([]byte(nil), salt...), StoredKey: sc.StoredKey, ServerKey: sc.ServerKey, Iterations: iterations}, nil
}

// FromSaltedPassword computes the credential from a salted password, the
// form AlterUserScramCredentials carries (the client ran PBKDF2, so the
// password never reaches the broker): RFC 5802's
// StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
// ServerKey = HMAC(SaltedPassword, "Server Key"), with the standard
// library's HMAC and the mechanism's hash.
func FromSaltedPassword(mechanism string, salt, saltedPassword []byte, iterations int) (Credential, error) {
	hash, ok := Hash(mechanism)
	if !ok {
		return Credential{}, fmt.Errorf("%w: mechanism %q is not one of %s", ErrInvalid, mechanism, strings.Join(Mechanisms, ", "))
	}
	if err := CheckIterations(iterations); err != nil {
		return Credential{}, err
	}
	switch size := hash().Size(); {
	case len(salt) == 0 || len(salt) > MaxSaltBytes:
		return Credential{}, fmt.Errorf("%w: a salt of %d bytes (1 to %d)", ErrInvalid, len(salt), MaxSaltBytes)
	case len(saltedPassword) != size:
		return Credential{}, fmt.Errorf("%w: a %s salted password is %d bytes, not %d", ErrInvalid, mechanism, size, len(saltedPassword))
	}
	keyed := func(key []byte, label string) []byte {
		m := hmac.New(hash, key)
		m.Write([]byte(label))
		return m.Sum(nil)
	}
	h := hash()
	h.Write(keyed(saltedPassword, "Client Key"))
	return Credential{
		Mechanism:  mechanism,
		Salt:       append([]byte(nil), salt...),
		StoredKey:  h.Sum(nil),
		ServerKey:  keyed(saltedPassword, "Server Key"),
		Iterations: iterations,
	}, nil
}

// Verify reports whether password is the one the credential was derived
// from: it derives again with the stored salt and iterations and compares
// the stored keys in constant time. PLAIN logins use it, so no plaintext
// password needs to be stored for them.
func (c Credential) Verify(password string) bool {
	got, err := Derive(c.Mechanism, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(got.StoredKey, c.StoredKey) == 1
}

// Stored is the credential in xdg-go/scram's form, for its server.
func (c Credential) Stored() scram.StoredCredentials {
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations},
		StoredKey:  c.StoredKey,
		ServerKey:  c.ServerKey,
	}
}

// Encode renders the credential in Kafka's stored form:
// "salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>".
func (c Credential) Encode() string {
	b64 := base64.StdEncoding.EncodeToString
	return "salt=" + b64(c.Salt) + ",stored_key=" + b64(c.StoredKey) + ",server_key=" + b64(c.ServerKey) + ",iterations=" + strconv.Itoa(c.Iterations)
}

// ParseCredential reads Encode's form for the given mechanism. Keys must
// be the mechanism's hash size and the iterations within bounds, so a
// damaged node cannot be used to authenticate anyone.
func ParseCredential(mechanism, s string) (Credential, error) {
	hash, ok := Hash(mechanism)
	if !ok {
		return Credential{}, fmt.Errorf("%w: mechanism %q", ErrInvalid, mechanism)
	}
	if len(s) > maxEncodedBytes {
		return Credential{}, fmt.Errorf("%w: %s credential of %d bytes", ErrInvalid, mechanism, len(s))
	}
	c := Credential{Mechanism: mechanism}
	seen := map[string]bool{}
	for field := range strings.SplitSeq(s, ",") {
		key, value, ok := strings.Cut(field, "=")
		if !ok || seen[key] {
			return Credential{}, fmt.Errorf("%w: %s credential field %q", ErrInvalid, mechanism, key)
		}
		seen[key] = true
		var err error
		switch key {
		case "salt":
			c.Salt, err = base64.StdEncoding.DecodeString(value)
		case "stored_key":
			c.StoredKey, err = base64.StdEncoding.DecodeString(value)
		case "server_key":
			c.ServerKey, err = base64.StdEncoding.DecodeString(value)
		case "iterations":
			c.Iterations, err = strconv.Atoi(value)
		default:
			err = errors.New("unknown field")
		}
		if err != nil {
			return Credential{}, fmt.Errorf("%w: %s credential field %q: %v", ErrInvalid, mechanism, key, err)
		}
	}
	size := hash().Size()
	switch {
	case len(c.Salt) == 0:
		return Credential{}, fmt.Errorf("%w: %s credential without a salt", ErrInvalid, mechanism)
	case len(c.StoredKey) != size || len(c.ServerKey) != size:
		return Credential{}, fmt.Errorf("%w: %s credential keys are not %d bytes", ErrInvalid, mechanism, size)
	}
	if err := CheckIterations(c.Iterations); err != nil {
		return Credential{}, err
	}
	return c, nil
}
