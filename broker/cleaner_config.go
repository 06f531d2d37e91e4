package broker

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// setCleaner applies a log.cleaner.* setting (Kafka's names) to
// c.Cleaner; ok is false for any other name.
func (c *Config) setCleaner(name, value string) (ok bool, err error) {
	integer := func() (int64, error) {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("broker: %s must be an integer: %w", name, err)
		}
		return n, nil
	}
	switch name {
	case "log.cleaner.enable":
		b, err := strconv.ParseBool(value)
		if err != nil {
			return true, fmt.Errorf("broker: %s must be true or false: %w", name, err)
		}
		c.Cleaner.Enable = b
	case "log.cleaner.threads":
		n, err := integer()
		if err != nil {
			return true, err
		}
		if n < 1 || n > math.MaxInt32 {
			return true, fmt.Errorf("broker: %s %d must be at least 1", name, n)
		}
		c.Cleaner.Threads = int(n)
	case "log.cleaner.io.max.bytes.per.second":
		// A double in Kafka; its default, Double.MAX_VALUE, is unlimited.
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return true, fmt.Errorf("broker: %s must be a number: %w", name, err)
		}
		c.Cleaner.IOMaxBytesPerSecond = f
	case "log.cleaner.dedupe.buffer.size":
		n, err := integer()
		if err != nil {
			return true, err
		}
		c.Cleaner.DedupeBufferSize = n
	case "log.cleaner.backoff.ms":
		n, err := integer()
		if err != nil {
			return true, err
		}
		c.Cleaner.Backoff = time.Duration(n) * time.Millisecond
	default:
		return false, nil
	}
	return true, nil
}
