package users

import (
	"crypto/hmac"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"strings"
)

// Kafka's broker accepts a SCRAM client-final message whose nonce ends
// with the nonce of its server-first message rather than equals it, and
// librdkafka (kcat, confluent-kafka) relies on that: it sends the client
// nonce followed by the whole server nonce, which already begins with the
// client nonce. xdg-go/scram's server insists on equality, as RFC 5802
// says, so a conversation whose final nonce is such a longer one is
// finished by VerifyClientFinal instead. Everything else goes through
// xdg-go's server.

// ExtendedNonce reports whether clientFinal's nonce is not serverNonce but
// ends with it: the librdkafka form VerifyClientFinal accepts.
func ExtendedNonce(clientFinal, serverNonce string) bool {
	nonce, ok := attribute(clientFinal, 'r')
	return ok && serverNonce != "" && nonce != serverNonce && strings.HasSuffix(nonce, serverNonce)
}

// ServerNonce returns the nonce of a server-first message.
func ServerNonce(serverFirst string) string {
	nonce, _ := attribute(serverFirst, 'r')
	return nonce
}

// VerifyClientFinal checks a client-final message against the stored
// credential, given the client-first message (with its GS2 header) and the
// server-first message of the conversation, and returns the server-final
// message. It follows RFC 5802 section 3, with the standard library's
// HMAC and the credential's hash:
//
//	AuthMessage     = client-first-message-bare "," server-first-message "," client-final-message-without-proof
//	ClientSignature = HMAC(StoredKey, AuthMessage)
//	ClientKey       = ClientProof XOR ClientSignature, which must hash to StoredKey
//	ServerSignature = HMAC(ServerKey, AuthMessage), sent as "v=<base64>"
func VerifyClientFinal(c Credential, clientFirst, serverFirst, clientFinal string) (string, error) {
	hash, ok := Hash(c.Mechanism)
	if !ok {
		return "", errors.New("scram: unknown mechanism")
	}
	// The GS2 header is everything up to the second comma ("n,," or
	// "n,a=authzid,"); the bare message follows it.
	first := strings.Index(clientFirst, ",")
	second := -1
	if first >= 0 {
		second = strings.Index(clientFirst[first+1:], ",")
	}
	if second < 0 {
		return "", errors.New("scram: malformed client-first message")
	}
	gs2, bare := clientFirst[:first+second+2], clientFirst[first+second+2:]
	if !strings.HasPrefix(gs2, "n,") {
		return "", errors.New("scram: channel binding is not supported")
	}
	cut := strings.LastIndex(clientFinal, ",p=")
	if cut < 0 {
		return "", errors.New("scram: client-final message without a proof")
	}
	withoutProof := clientFinal[:cut]
	proof, err := base64.StdEncoding.DecodeString(clientFinal[cut+3:])
	if err != nil {
		return "", errors.New("scram: malformed proof")
	}
	binding, ok := attribute(withoutProof, 'c')
	if !ok || binding != base64.StdEncoding.EncodeToString([]byte(gs2)) {
		return "", errors.New("scram: channel binding does not match the GS2 header")
	}
	if !ExtendedNonce(withoutProof, ServerNonce(serverFirst)) {
		if nonce, _ := attribute(withoutProof, 'r'); nonce != ServerNonce(serverFirst) {
			return "", errors.New("scram: nonce does not match")
		}
	}
	authMessage := []byte(bare + "," + serverFirst + "," + withoutProof)
	mac := func(key []byte) []byte {
		m := hmac.New(hash, key)
		m.Write(authMessage)
		return m.Sum(nil)
	}
	signature := mac(c.StoredKey)
	if len(proof) != len(signature) {
		return "", errors.New("scram: proof of the wrong length")
	}
	clientKey := make([]byte, len(proof))
	subtle.XORBytes(clientKey, proof, signature)
	h := hash()
	h.Write(clientKey)
	if subtle.ConstantTimeCompare(h.Sum(nil), c.StoredKey) != 1 {
		return "", errors.New("scram: invalid proof")
	}
	return "v=" + base64.StdEncoding.EncodeToString(mac(c.ServerKey)), nil
}

// attribute returns the value of the SCRAM attribute "<name>=" in msg.
func attribute(msg string, name byte) (string, bool) {
	for field := range strings.SplitSeq(msg, ",") {
		if len(field) >= 2 && field[0] == name && field[1] == '=' {
			return field[2:], true
		}
	}
	return "", false
}
