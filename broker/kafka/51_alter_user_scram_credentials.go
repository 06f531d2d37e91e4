package kafka

// AlterUserScramCredentials (key 51), version 0 (KIP-554).
//
// Upserts and deletes SCRAM credentials in the coordination store
// (broker/users); every broker's credential cache follows the change
// notification. An upsertion carries the salt, the iteration count and
// the salted password (the client ran PBKDF2), from which the stored and
// server keys are computed; the password itself never reaches the broker.
// One result per user named, as in Kafka, with the first error found for
// that user; a user with any error has none of its alterations applied:
//
//   - UNACCEPTABLE_CREDENTIAL: an empty or invalid user name, iterations
//     outside 4096..16384, an empty salt or a salted password of the wrong
//     length;
//   - UNSUPPORTED_SASL_MECHANISM: a mechanism other than SCRAM-SHA-256/512;
//   - DUPLICATE_RESOURCE: the same user and mechanism altered twice in the
//     request (upserted twice, or upserted and deleted);
//   - RESOURCE_NOT_FOUND: deleting a credential that does not exist.
//
// Needs Alter on the cluster when an authorizer is on
// (CLUSTER_AUTHORIZATION_FAILED for every user otherwise).

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/users"
)

func init() { regKey(51, 0, 0, handleAlterUserSCRAMCredentials) }

// scramAlteration is one user's part of the request.
type scramAlteration struct {
	upserts []users.Credential
	deletes []string // mechanisms
	err     *kerr.Error
	message string
}

func handleAlterUserSCRAMCredentials(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)

	var order []string
	byUser := map[string]*scramAlteration{}
	seen := map[[2]string]bool{} // user, mechanism
	alteration := func(user, mechanism string) *scramAlteration {
		a := byUser[user]
		if a == nil {
			a = &scramAlteration{}
			byUser[user] = a
			order = append(order, user)
		}
		fail := func(err *kerr.Error, msg string) {
			if a.err == nil {
				a.err, a.message = err, msg
			}
		}
		switch {
		case users.CheckName(user) != nil:
			fail(kerr.UnacceptableCredential, "Username must be 1 to 255 bytes of UTF-8 without control characters")
		case mechanism == "":
			fail(kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		case seen[[2]string{user, mechanism}]:
			fail(kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
		}
		seen[[2]string{user, mechanism}] = true
		return a
	}
	for _, d := range req.Deletions {
		mech := scramMechanismName(d.Mechanism)
		a := alteration(d.Name, mech)
		a.deletes = append(a.deletes, mech)
	}
	for _, u := range req.Upsertions {
		mech := scramMechanismName(u.Mechanism)
		a := alteration(u.Name, mech)
		if a.err != nil {
			continue
		}
		cred, err := users.FromSaltedPassword(mech, u.Salt, u.SaltedPassword, int(u.Iterations))
		if err != nil {
			a.err, a.message = kerr.UnacceptableCredential, err.Error()
			continue
		}
		a.upserts = append(a.upserts, cred)
	}

	allowed := b.authorizedCluster(r, acl.Alter)
	for _, user := range order {
		a := byUser[user]
		result := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		result.User = user
		switch {
		case !allowed:
			result.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		case a.err != nil:
			result.ErrorCode, result.ErrorMessage = a.err.Code, strp(a.message)
		case b.store == nil:
			result.ErrorCode, result.ErrorMessage = kerr.UnknownServerError.Code, strp("no coordination store")
		default:
			if err := b.alterSCRAM(user, a); err != nil {
				result.ErrorCode, result.ErrorMessage = err.err.Code, strp(err.message)
			}
		}
		resp.Results = append(resp.Results, result)
	}
	return resp, nil
}

// alterSCRAM applies one user's deletions, then upsertions. Deletions are
// checked first so a missing credential leaves the user untouched.
func (b *Broker) alterSCRAM(user string, a *scramAlteration) *scramAlteration {
	if len(a.deletes) > 0 {
		creds, err := users.Get(b.store, user)
		if err != nil && !errors.Is(err, users.ErrNoUser) {
			return b.scramStoreFailure(user, err)
		}
		for _, m := range a.deletes {
			if _, ok := creds[m]; !ok {
				return &scramAlteration{err: kerr.ResourceNotFound, message: "Attempt to delete a user credential that does not exist"}
			}
		}
	}
	for _, m := range a.deletes {
		if err := users.Delete(b.store, user, m); err != nil {
			return b.scramStoreFailure(user, err)
		}
	}
	for _, c := range a.upserts {
		if err := users.Upsert(b.store, user, c); err != nil {
			return b.scramStoreFailure(user, err)
		}
	}
	if len(a.deletes)+len(a.upserts) > 0 {
		b.logger.Info("SCRAM credentials altered", "user", user, "upserted", len(a.upserts), "deleted", len(a.deletes))
	}
	return nil
}

func (b *Broker) scramStoreFailure(user string, err error) *scramAlteration {
	if errors.Is(err, users.ErrNoUser) {
		return &scramAlteration{err: kerr.ResourceNotFound, message: "Attempt to delete a user credential that does not exist"}
	}
	b.logger.Error("writing SCRAM credentials", "user", user, "err", err)
	return &scramAlteration{err: kerr.UnknownServerError, message: "writing the credentials failed"}
}
