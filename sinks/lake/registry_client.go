package lake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"millrace/schemas/format"
	"millrace/schemas/srclient"
)

// registryClient is the SchemaSource of a worker given none: the registry
// client (schemas/srclient) made from Config.Registry, its errors sorted
// into the record's faults (dead letters) and the registry's (a stop).
type registryClient struct {
	client  *srclient.Client
	timeout time.Duration // bounds one Decode's fetch of an unknown ID
}

func newRegistryClient(cfg RegistryConfig) (*registryClient, error) {
	c, err := srclient.New(cfg.Config)
	if err != nil {
		return nil, fmt.Errorf("lake: schema registry: %w", err)
	}
	return &registryClient{client: c, timeout: cfg.Config.WithDefaults().Timeout}, nil
}

func (r *registryClient) Decode(value []byte) (int, format.Schema, any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	id, s, v, err := r.client.Decode(ctx, value)
	return id, s, v, recordFault(err)
}

func (r *registryClient) Latest(ctx context.Context, subject string) (int, format.Schema, error) {
	sub, err := r.client.Latest(ctx, subject)
	if err != nil {
		return 0, nil, recordFault(err)
	}
	return sub.ID, sub.Schema, nil
}

// recordFault wraps the client's record faults in the lake's: a value not
// in Confluent's framing or not decoding is ErrUndecodable, an ID the
// registry does not know is ErrUnknownSchema; anything else (the registry
// unavailable) stays as it is, which stops the worker.
func recordFault(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, srclient.ErrNotFramed), errors.Is(err, srclient.ErrUndecodable):
		return fmt.Errorf("%w: %w", ErrUndecodable, err)
	case errors.Is(err, srclient.ErrUnknownSchema):
		return fmt.Errorf("%w: %w", ErrUnknownSchema, err)
	}
	return err
}
