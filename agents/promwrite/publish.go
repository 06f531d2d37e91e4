package promwrite

import (
	"context"
	"net/http"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
)

// Producer is what the handler produces through; *ship.Shipper implements
// it (ship.Publisher).
type Producer = ship.Publisher

// publish produces recs, each acknowledged through acks[i] as well, and
// waits until the broker acknowledged all of them, as the beacon's
// /v1/metrics does: a request the producer's buffer cannot hold now is
// refused whole (503), one it could never hold is 413 (Prometheus would
// retry a 503 forever).
func (h *Handler) publish(ctx context.Context, recs []*kgo.Record, acks []ship.AckFunc) error {
	errs, err := ship.ProduceAll(ctx, h.producer, recs, acks, h.cfg.AckTimeout)
	return ship.Refuse(errs, err, "a sample", "samples", &ship.Refusal{Status: http.StatusRequestEntityTooLarge,
		Reason: "the request's samples are more than the producer can buffer; lower the remote_write queue_config's max_samples_per_send"})
}
