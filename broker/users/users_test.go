package users

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xdg-go/scram"

	"millrace/broker/coord"
	"millrace/broker/coord/embedded"
	"millrace/internal/waitfor"
)

// rfcVector is a published SCRAM exchange: RFC 7677 section 3
// (SCRAM-SHA-256) and RFC 5802 section 5 (SCRAM-SHA-1), both for user
// "user" with password "pencil".
type rfcVector struct {
	name        string
	hash        scram.HashGeneratorFcn
	salt        string // base64
	iterations  int
	clientFirst string
	serverNonce string // the server's part of the combined nonce
	serverFirst string
	clientFinal string
	serverFinal string
}

var rfcVectors = []rfcVector{
	{
		name: "RFC 7677 SCRAM-SHA-256", hash: scram.SHA256,
		salt: "W22ZaJ0SNY7soEsUEjb6gQ==", iterations: 4096,
		clientFirst: "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
		serverNonce: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
		serverFirst: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
		clientFinal: "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		serverFinal: "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
	},
	{
		name: "RFC 5802 SCRAM-SHA-1", hash: scram.SHA1,
		salt: "QSXCR+Q6sek8bf92", iterations: 4096,
		clientFirst: "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
		serverNonce: "3rfcNHYJY1ZVvWVs7j",
		serverFirst: "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
		clientFinal: "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
		serverFinal: "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
	},
}

// TestRFCVectors derives the stored credential from the password, passes
// it through the stored text form, and has xdg-go's server run the RFC's
// exchange on it: the server's messages must be the RFC's, byte for byte.
func TestRFCVectors(t *testing.T) {
	for _, v := range rfcVectors {
		t.Run(v.name, func(t *testing.T) {
			salt, err := base64.StdEncoding.DecodeString(v.salt)
			if err != nil {
				t.Fatal(err)
			}
			cred, err := derive(v.hash, "vector", "pencil", salt, v.iterations)
			if err != nil {
				t.Fatal(err)
			}
			// Round trip through the stored form (parsed as SHA-256 or
			// SHA-512 only, so re-read by hand for SHA-1's key size).
			if v.hash().Size() == 32 {
				if cred, err = ParseCredential(SCRAMSHA256, cred.Encode()); err != nil {
					t.Fatalf("parsing %q: %v", cred.Encode(), err)
				}
			}
			server, err := v.hash.NewServer(func(user string) (scram.StoredCredentials, error) {
				if user != "user" {
					return scram.StoredCredentials{}, errors.New("unknown user")
				}
				return cred.Stored(), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			conv := server.WithNonceGenerator(func() string { return v.serverNonce }).NewConversation()
			first, err := conv.Step(v.clientFirst)
			if err != nil || first != v.serverFirst {
				t.Fatalf("server-first = %q, %v; want %q", first, err, v.serverFirst)
			}
			final, err := conv.Step(v.clientFinal)
			if err != nil || final != v.serverFinal {
				t.Fatalf("server-final = %q, %v; want %q", final, err, v.serverFinal)
			}
			if !conv.Valid() || conv.Username() != "user" {
				t.Fatalf("conversation valid=%v user=%q", conv.Valid(), conv.Username())
			}
		})
	}
}

// TestRFC7677WrongProof: the RFC's exchange with a proof from another
// password fails.
func TestRFC7677WrongProof(t *testing.T) {
	v := rfcVectors[0]
	salt, _ := base64.StdEncoding.DecodeString(v.salt)
	cred, err := Derive(SCRAMSHA256, "not pencil", salt, v.iterations)
	if err != nil {
		t.Fatal(err)
	}
	server, _ := scram.SHA256.NewServer(func(string) (scram.StoredCredentials, error) { return cred.Stored(), nil })
	conv := server.WithNonceGenerator(func() string { return v.serverNonce }).NewConversation()
	if _, err := conv.Step(v.clientFirst); err != nil {
		t.Fatal(err)
	}
	if _, err := conv.Step(v.clientFinal); err == nil || conv.Valid() {
		t.Fatal("a proof for pencil was accepted against another password's credential")
	}
}

func TestVerify(t *testing.T) {
	for _, mech := range Mechanisms {
		cred, err := NewCredential(mech, "s3cret", MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		if len(cred.Salt) != saltBytes {
			t.Fatalf("salt of %d bytes", len(cred.Salt))
		}
		if !cred.Verify("s3cret") {
			t.Fatalf("%s: right password refused", mech)
		}
		if cred.Verify("s3cret ") || cred.Verify("") {
			t.Fatalf("%s: wrong password accepted", mech)
		}
	}
}

func TestCredentialChecks(t *testing.T) {
	if _, err := Derive("SCRAM-SHA-1", "p", []byte("salt"), MinIterations); !errors.Is(err, ErrInvalid) {
		t.Errorf("SCRAM-SHA-1: %v", err)
	}
	for _, n := range []int{MinIterations - 1, MaxIterations + 1} {
		if _, err := Derive(SCRAMSHA256, "p", []byte("salt"), n); !errors.Is(err, ErrInvalid) {
			t.Errorf("%d iterations: %v", n, err)
		}
	}
	good, _ := NewCredential(SCRAMSHA512, "p", MinIterations)
	for name, text := range map[string]string{
		"short keys":       "salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=4096",
		"no salt":          "stored_key=" + base64.StdEncoding.EncodeToString(good.StoredKey) + ",server_key=" + base64.StdEncoding.EncodeToString(good.ServerKey) + ",iterations=4096",
		"low iterations":   strings.Replace(good.Encode(), "iterations=4096", "iterations=1", 1),
		"duplicate field":  good.Encode() + ",iterations=4096",
		"unknown field":    good.Encode() + ",x=1",
		"huge":             strings.Repeat("a", maxEncodedBytes+1),
		"sha-256 key size": good.Encode(),
	} {
		mech := SCRAMSHA512
		if name == "sha-256 key size" {
			mech = SCRAMSHA256 // a SHA-512 credential read as SHA-256
		}
		if _, err := ParseCredential(mech, text); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"", ".", "..", "a\nb", strings.Repeat("x", MaxNameBytes+1), "\xff"} {
		if err := CheckName(name); !errors.Is(err, ErrInvalid) {
			t.Errorf("name %q accepted", name)
		}
	}
}

func TestNodeNames(t *testing.T) {
	for _, name := range []string{"alice", "a b", "a/b", "a~b*c", "ü@x.org", "%41"} {
		node := nodeName(name)
		if strings.Contains(node, "/") || node == "." || node == ".." {
			t.Errorf("%q → node %q", name, node)
		}
		if back, err := userName(node); err != nil || back != name {
			t.Errorf("%q → %q → %q, %v", name, node, back, err)
		}
	}
	if got := nodeName("a b~c*"); got != "a%20b%7Ec%2A" {
		t.Errorf("sanitized %q", got)
	}
}

func openStore(t *testing.T) coord.Store {
	t.Helper()
	srv, err := embedded.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	s, err := srv.Session()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStoreAndCache: writes land in Kafka's node format, a second store
// session's cache follows them, and deletes remove what they name.
func TestStoreAndCache(t *testing.T) {
	s := openStore(t)
	cache := NewCache(s, nil)
	cache.Start()
	defer cache.Close()

	// A password with spaces, which base64 never holds, so it cannot turn
	// up in the salt or the keys by chance.
	const password = "correct horse battery"
	cred, _ := NewCredential(SCRAMSHA512, password, MinIterations)
	if err := Upsert(s, "a b", cred); err != nil {
		t.Fatal(err)
	}
	data, _, err := s.Get("/config/users/a%20b")
	if err != nil || !strings.Contains(string(data), `"SCRAM-SHA-512":"salt=`) || strings.Contains(string(data), password) {
		t.Fatalf("node %s, %v", data, err)
	}
	waitfor.Until(t, 5*time.Second, "the SCRAM-SHA-512 credential in the cache", func() bool { _, ok := cache.Lookup("a b", SCRAMSHA512); return ok })

	cred256, _ := NewCredential(SCRAMSHA256, "pw2", MaxIterations)
	if err := Upsert(s, "a b", cred256); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 5*time.Second, "the SCRAM-SHA-256 credential in the cache", func() bool { _, ok := cache.Lookup("a b", SCRAMSHA256); return ok })
	if any, _ := cache.LookupAny("a b"); any.Mechanism != SCRAMSHA512 {
		t.Fatalf("LookupAny gave %s", any.Mechanism)
	}
	if err := Delete(s, "a b", SCRAMSHA512); err != nil {
		t.Fatal(err)
	}
	if err := Delete(s, "a b", SCRAMSHA512); !errors.Is(err, ErrNoUser) {
		t.Fatalf("second delete: %v", err)
	}
	waitfor.Until(t, 5*time.Second, "the SCRAM-SHA-512 credential gone from the cache", func() bool { _, ok := cache.Lookup("a b", SCRAMSHA512); return !ok })
	if err := Delete(s, "a b", ""); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := s.Exists("/config/users/a%20b"); ok {
		t.Fatal("a user without credentials keeps its node")
	}
	if _, err := Get(s, "a b"); !errors.Is(err, ErrNoUser) {
		t.Fatalf("Get after delete: %v", err)
	}
	waitfor.Until(t, 5*time.Second, "every credential of the user gone from the cache", func() bool { _, ok := cache.LookupAny("a b"); return !ok })
}

// TestChangesPruned: notifications do not pile up.
func TestChangesPruned(t *testing.T) {
	s := openStore(t)
	cred, _ := NewCredential(SCRAMSHA256, "pw", MinIterations)
	for range keepChanges + 5 {
		if err := Upsert(s, "u", cred); err != nil {
			t.Fatal(err)
		}
	}
	names, err := s.Children(ChangesPath)
	if err != nil || len(names) != keepChanges {
		t.Fatalf("%d notifications, %v", len(names), err)
	}
}

// TestFromSaltedPassword: the credential computed from a client's salted
// password (AlterUserScramCredentials) is the one derived from the
// password itself.
func TestFromSaltedPassword(t *testing.T) {
	for _, mech := range Mechanisms {
		hash, _ := Hash(mech)
		salt := []byte("0123456789abcdef")
		salted, err := pbkdf2.Key(hash, "pencil", salt, MinIterations, hash().Size())
		if err != nil {
			t.Fatal(err)
		}
		got, err := FromSaltedPassword(mech, salt, salted, MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := Derive(mech, "pencil", salt, MinIterations)
		if got.Encode() != want.Encode() || !got.Verify("pencil") {
			t.Fatalf("%s: %s, want %s", mech, got.Encode(), want.Encode())
		}
		if _, err := FromSaltedPassword(mech, salt, salted[1:], MinIterations); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: short salted password: %v", mech, err)
		}
		if _, err := FromSaltedPassword(mech, nil, salted, MinIterations); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: no salt: %v", mech, err)
		}
	}
}

// TestVerifyClientFinal: the RFC 7677 exchange verifies and yields the
// RFC's server-final message; the same exchange with librdkafka's extended
// nonce (client nonce, then the whole server nonce) verifies too, with a
// proof computed over what that client sends; a wrong proof, a foreign
// nonce and a wrong channel binding fail.
func TestVerifyClientFinal(t *testing.T) {
	v := rfcVectors[0]
	salt, _ := base64.StdEncoding.DecodeString(v.salt)
	cred, err := Derive(SCRAMSHA256, "pencil", salt, v.iterations)
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifyClientFinal(cred, v.clientFirst, v.serverFirst, v.clientFinal)
	if err != nil || got != v.serverFinal {
		t.Fatalf("RFC 7677: %q, %v", got, err)
	}

	clientNonce := "rOprNGfwEbeRWgbNEkqO"
	serverNonce := ServerNonce(v.serverFirst)
	withoutProof := "c=biws,r=" + clientNonce + serverNonce
	if !ExtendedNonce(withoutProof, serverNonce) || ExtendedNonce(v.clientFinal, serverNonce) {
		t.Fatal("ExtendedNonce misjudges")
	}
	// The client's side, computed here from the password.
	salted, _ := pbkdf2.Key(sha256.New, "pencil", salt, v.iterations, 32)
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	authMessage := strings.TrimPrefix(v.clientFirst, "n,,") + "," + v.serverFirst + "," + withoutProof
	proof := make([]byte, 32)
	subtle.XORBytes(proof, clientKey, mac(storedKey[:], authMessage))
	final := withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)
	want := "v=" + base64.StdEncoding.EncodeToString(mac(mac(salted, "Server Key"), authMessage))
	if got, err := VerifyClientFinal(cred, v.clientFirst, v.serverFirst, final); err != nil || got != want {
		t.Fatalf("extended nonce: %q, %v", got, err)
	}

	proof[0] ^= 1
	for name, bad := range map[string]string{
		"wrong proof":     withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof),
		"foreign nonce":   strings.Replace(v.clientFinal, "r=rOpr", "r=xOpr", 1),
		"channel binding": strings.Replace(v.clientFinal, "c=biws", "c=eSws", 1),
		"no proof":        withoutProof,
	} {
		if _, err := VerifyClientFinal(cred, v.clientFirst, v.serverFirst, bad); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

// BenchmarkVerify is the cost of a PLAIN login's password check (one
// PBKDF2 derivation at the stored iterations), the bulk of a SCRAM
// exchange's cost on the client side too.
func BenchmarkVerify(b *testing.B) {
	for _, mech := range Mechanisms {
		for _, iterations := range []int{MinIterations, MaxIterations} {
			cred, _ := NewCredential(mech, "password", iterations)
			b.Run(fmt.Sprintf("%s/%d", mech, iterations), func(b *testing.B) {
				for b.Loop() {
					if !cred.Verify("password") {
						b.Fatal("refused")
					}
				}
			})
		}
	}
}
