package users

import (
	"testing"
)

// FuzzParseCredential: any stored text is parsed or refused, never
// panics, and what parses encodes back to a credential that parses the same.
func FuzzParseCredential(f *testing.F) {
	good, _ := Derive(SCRAMSHA256, "pencil", []byte("salt"), MinIterations)
	f.Add(good.Encode())
	f.Add("salt=,stored_key=,server_key=,iterations=")
	f.Add("iterations=99999999999999999999")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := ParseCredential(SCRAMSHA256, text)
		if err != nil {
			return
		}
		again, err := ParseCredential(SCRAMSHA256, c.Encode())
		if err != nil || again.Encode() != c.Encode() {
			t.Fatalf("%q parses, its encoding %q does not: %v", text, c.Encode(), err)
		}
	})
}

// FuzzVerifyClientFinal: any client messages are verified or refused
// without panicking, and none but the right proof verifies.
func FuzzVerifyClientFinal(f *testing.F) {
	v := rfcVectors[0]
	f.Add(v.clientFirst, v.clientFinal)
	f.Add("n,,", "c=biws,r=,p=")
	f.Add("n,a=x,n=y,r=z", "p=,c=,r=")
	cred, _ := Derive(SCRAMSHA256, "not pencil", []byte("salt"), MinIterations)
	f.Fuzz(func(t *testing.T, clientFirst, clientFinal string) {
		if _, err := VerifyClientFinal(cred, clientFirst, v.serverFirst, clientFinal); err == nil {
			t.Fatalf("verified %q / %q against another password", clientFirst, clientFinal)
		}
	})
}
