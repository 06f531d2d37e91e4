package kafka

// DescribeUserScramCredentials (key 50), version 0 (KIP-554).
//
// Lists the SCRAM mechanisms and iteration counts stored for the users
// named, or for every user when none is named (a null or empty list, as in
// Kafka). Salts and keys never leave the broker. A user named twice gets
// DUPLICATE_RESOURCE, a user without credentials RESOURCE_NOT_FOUND, an
// invalid name UNACCEPTABLE_CREDENTIAL. It reads the coordination store,
// not the authentication cache, so a change made through any broker shows
// at once. Needs Describe on the cluster when an authorizer is on
// (CLUSTER_AUTHORIZATION_FAILED otherwise, for the whole request).

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/users"
)

func init() { regKey(50, 0, 0, handleDescribeUserSCRAMCredentials) }

// scramMechanismCodes are the wire codes of the SCRAM mechanisms
// (Kafka's ScramMechanism: 0 is UNKNOWN).
var scramMechanismCodes = map[string]int8{users.SCRAMSHA256: 1, users.SCRAMSHA512: 2}

// scramMechanismName is scramMechanismCodes' inverse; "" for unknown.
func scramMechanismName(code int8) string {
	for name, c := range scramMechanismCodes {
		if c == code {
			return name
		}
	}
	return ""
}

func handleDescribeUserSCRAMCredentials(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !b.authorizedCluster(r, acl.Describe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if b.store == nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, strp("no coordination store")
		return resp, nil
	}
	if len(req.Users) == 0 {
		all, err := users.List(b.store)
		if err != nil {
			b.logger.Error("listing SCRAM credentials", "err", err)
			resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, strp("reading the credentials failed")
			return resp, nil
		}
		for _, name := range users.Names(all) {
			resp.Results = append(resp.Results, describedUser(name, all[name]))
		}
		return resp, nil
	}
	count := map[string]int{}
	for _, u := range req.Users {
		count[u.Name]++
	}
	for _, u := range req.Users {
		result := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		result.User = u.Name
		if count[u.Name] < 0 {
			continue // a duplicate, answered once already
		}
		if count[u.Name] > 1 {
			count[u.Name] = -1
			result.ErrorCode, result.ErrorMessage = kerr.DuplicateResource.Code, strp("Cannot describe SCRAM credentials for the same user twice in a single request")
			resp.Results = append(resp.Results, result)
			continue
		}
		creds, err := users.Get(b.store, u.Name)
		switch {
		case errors.Is(err, users.ErrNoUser):
			result.ErrorCode, result.ErrorMessage = kerr.ResourceNotFound.Code, strp("Attempt to describe a user credential that does not exist")
		case errors.Is(err, users.ErrInvalid):
			result.ErrorCode, result.ErrorMessage = kerr.UnacceptableCredential.Code, strp(err.Error())
		case err != nil:
			b.logger.Error("reading SCRAM credentials", "user", u.Name, "err", err)
			result.ErrorCode, result.ErrorMessage = kerr.UnknownServerError.Code, strp("reading the credentials failed")
		default:
			result = describedUser(u.Name, creds)
		}
		resp.Results = append(resp.Results, result)
	}
	return resp, nil
}

// describedUser is a user's result: mechanism and iterations of each
// credential, in mechanism order.
func describedUser(name string, creds map[string]users.Credential) kmsg.DescribeUserSCRAMCredentialsResponseResult {
	result := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
	result.User = name
	for _, m := range users.Mechanisms {
		if c, ok := creds[m]; ok {
			info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			info.Mechanism, info.Iterations = scramMechanismCodes[m], int32(c.Iterations)
			result.CredentialInfos = append(result.CredentialInfos, info)
		}
	}
	return result
}
