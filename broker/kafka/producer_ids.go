package kafka

// Producer ID allocation (docs/architecture.md §3, KIP-98). Every broker hands out IDs
// from a block it reserved in the coordination store, so that IDs are
// unique across brokers and restarts without a store write per producer.
//
// The persistent node /latest_producer_id_block holds the last block anyone
// reserved, as JSON:
//
//	{"version":1,"broker":<broker id>,"block_start":<first id>,"block_end":<last id>}
//
// A broker reserves the next block by reading the node and writing
// block_start = block_end+1 with compare-and-set on the node's version;
// losing the race to another broker means reading again. Blocks are never
// returned: IDs left in a block when a broker stops are skipped, which is
// harmless (there are 2^63 of them).

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"

	"millrace/broker/coord"
)

const (
	// producerIDBlockPath is the store node holding the latest block.
	producerIDBlockPath = "/latest_producer_id_block"
	// producerIDBlockSize is how many IDs one reservation covers (Kafka's
	// PRODUCER_ID_BLOCK_SIZE).
	producerIDBlockSize = 1000
	// producerIDBlockVersion is the JSON format version.
	producerIDBlockVersion = 1
	// producerIDReserveAttempts bounds compare-and-set retries; each failure
	// means another broker reserved a block meanwhile.
	producerIDReserveAttempts = 20
)

// errProducerIDsExhausted: the int64 ID space is used up.
var errProducerIDsExhausted = errors.New("producer IDs exhausted")

// producerIDBlock is the JSON of /latest_producer_id_block.
type producerIDBlock struct {
	Version    int   `json:"version"`
	Broker     int32 `json:"broker"`
	BlockStart int64 `json:"block_start"`
	BlockEnd   int64 `json:"block_end"`
}

// producerIDs hands out producer IDs from blocks reserved in the store.
type producerIDs struct {
	store    coord.Store
	brokerID int32
	// blockSize is producerIDBlockSize except in tests.
	blockSize int64

	mu   sync.Mutex // guards the following; held across a reservation
	next int64      // next ID to hand out
	end  int64      // last ID of the current block; next > end: none left
}

func newProducerIDs(store coord.Store, brokerID int32) *producerIDs {
	return &producerIDs{store: store, brokerID: brokerID, blockSize: producerIDBlockSize, next: 0, end: -1}
}

// nextID returns a fresh producer ID, reserving a block when needed.
func (p *producerIDs) nextID() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next > p.end {
		start, end, err := p.reserveLocked()
		if err != nil {
			return -1, err
		}
		p.next, p.end = start, end
	}
	id := p.next
	p.next++
	return id, nil
}

// reserveLocked reserves the block after the latest one in the store.
func (p *producerIDs) reserveLocked() (start, end int64, err error) {
	if p.store == nil {
		return 0, 0, errors.New("no coordination store to reserve producer IDs from")
	}
	for range producerIDReserveAttempts {
		data, stat, err := p.store.Get(producerIDBlockPath)
		switch {
		case errors.Is(err, coord.ErrNoNode):
			block := producerIDBlock{Version: producerIDBlockVersion, Broker: p.brokerID, BlockStart: 0, BlockEnd: p.blockSize - 1}
			_, err := p.store.Create(producerIDBlockPath, mustMarshal(block), coord.Persistent)
			if errors.Is(err, coord.ErrNodeExists) {
				continue // another broker created it first
			}
			if err != nil {
				return 0, 0, fmt.Errorf("creating %s: %w", producerIDBlockPath, err)
			}
			return block.BlockStart, block.BlockEnd, nil
		case err != nil:
			return 0, 0, fmt.Errorf("reading %s: %w", producerIDBlockPath, err)
		}
		var latest producerIDBlock
		if err := json.Unmarshal(data, &latest); err != nil {
			return 0, 0, fmt.Errorf("decoding %s: %w", producerIDBlockPath, err)
		}
		if latest.Version != producerIDBlockVersion {
			return 0, 0, fmt.Errorf("%s has version %d, this broker knows %d", producerIDBlockPath, latest.Version, producerIDBlockVersion)
		}
		if latest.BlockEnd < latest.BlockStart || latest.BlockEnd > math.MaxInt64-p.blockSize {
			return 0, 0, fmt.Errorf("%s: block %d..%d: %w", producerIDBlockPath, latest.BlockStart, latest.BlockEnd, errProducerIDsExhausted)
		}
		block := producerIDBlock{Version: producerIDBlockVersion, Broker: p.brokerID, BlockStart: latest.BlockEnd + 1, BlockEnd: latest.BlockEnd + p.blockSize}
		_, err = p.store.Set(producerIDBlockPath, mustMarshal(block), stat.Version)
		if errors.Is(err, coord.ErrBadVersion) {
			continue // another broker reserved a block meanwhile
		}
		if err != nil {
			return 0, 0, fmt.Errorf("writing %s: %w", producerIDBlockPath, err)
		}
		return block.BlockStart, block.BlockEnd, nil
	}
	return 0, 0, fmt.Errorf("reserving a producer ID block: lost the compare-and-set race %d times", producerIDReserveAttempts)
}

// mustMarshal encodes a value that cannot fail to encode.
func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a plain struct of integers always encodes
	}
	return b
}
