package txn

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"millrace/broker/coord"
)

// Describe returns the state of transactional ID id
// (DescribeTransactions): NOT_COORDINATOR when another broker coordinates
// it, TRANSACTIONAL_ID_NOT_FOUND when it has none.
func (c *Coordinator) Describe(id string) (Metadata, int16) {
	if !c.owns(id) {
		return Metadata{}, kerr.NotCoordinator.Code
	}
	m, _, found, err := load(c.store, id)
	if err != nil {
		return Metadata{}, c.storeCode(id, err)
	}
	if !found {
		return Metadata{}, kerr.TransactionalIDNotFound.Code
	}
	return m, 0
}

// List returns the transactional IDs this broker coordinates
// (ListTransactions), keeping those in one of states and of one of
// producerIDs when these are not empty.
func (c *Coordinator) List(states []State, producerIDs []int64) ([]Metadata, int16) {
	names, err := c.store.Children(transactionsRoot)
	if err != nil {
		return nil, c.storeCode("", err)
	}
	var out []Metadata
	for _, name := range names {
		id, ok := coord.UnescapeName(name)
		if !ok || !c.owns(id) {
			continue
		}
		m, _, found, err := load(c.store, id)
		if err != nil {
			return nil, c.storeCode(id, err)
		}
		if !found {
			continue
		}
		if len(states) > 0 && !slices.Contains(states, m.State) {
			continue
		}
		if len(producerIDs) > 0 && !slices.Contains(producerIDs, m.ProducerID) {
			continue
		}
		out = append(out, m)
	}
	return out, 0
}
