package ship

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrBufferFull is the answer of TryProduce when the buffer of records not
// yet acknowledged is at its limit. It is retryable: an HTTP agent answers
// 503 with Retry-After, a reader pauses.
var ErrBufferFull = errors.New("ship: producer buffer is full")

// ErrClosed is returned for records produced after Shutdown or Close.
var ErrClosed = errors.New("ship: shipper is closed")

// ErrNotStarted is returned for records produced before Start.
var ErrNotStarted = errors.New("ship: shipper is not started")

// Kind is the class of a produce error, used for decisions and as the
// "kind" label of the errors metric.
type Kind string

// The kinds of produce errors.
const (
	KindNone       Kind = ""
	KindBufferFull Kind = "buffer_full" // retry later; nothing was sent
	KindTimeout    Kind = "timeout"     // delivery timeout or retries exhausted; retry
	KindBroker     Kind = "broker"      // a retriable Kafka error code
	KindCanceled   Kind = "canceled"    // the caller's context ended
	KindClosed     Kind = "closed"      // the shipper is closed; not retryable here
	KindTooLarge   Kind = "too_large"   // the record can never fit a batch
	KindRejected   Kind = "rejected"    // a non-retriable Kafka error code
	KindDenied     Kind = "denied"      // authentication or authorization failed; retry once fixed
	KindOther      Kind = "other"
)

// Classify returns the kind of a produce error.
func Classify(err error) Kind {
	switch {
	case err == nil:
		return KindNone
	case errors.Is(err, ErrBufferFull), errors.Is(err, kgo.ErrMaxBuffered):
		return KindBufferFull
	case errors.Is(err, ErrClosed), errors.Is(err, ErrNotStarted), errors.Is(err, kgo.ErrClientClosed):
		return KindClosed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return KindCanceled
	case errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, kgo.ErrRecordRetries):
		return KindTimeout
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return KindTooLarge
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.TopicAuthorizationFailed),
		errors.Is(err, kerr.ClusterAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		// Kafka calls these permanent, but the record is not at fault: the
		// agent's credentials or ACLs are, and an operator fixes those.
		// Dropping the record meanwhile would lose it.
		return KindDenied
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		if ke.Retriable {
			return KindBroker
		}
		return KindRejected
	}
	return KindOther
}

// IsRetryable reports whether sending the same record again later may
// succeed. Permanent errors (too large, rejected by the broker, closed)
// will fail again however often the record is sent.
func IsRetryable(err error) bool {
	switch Classify(err) {
	case KindBufferFull, KindTimeout, KindBroker, KindDenied, KindCanceled, KindOther:
		return true
	}
	return false
}
