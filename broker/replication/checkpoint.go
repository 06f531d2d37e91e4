package replication

// The high-watermark checkpoint (Kafka's replication-offset-checkpoint): one
// file in the log directory holding, for every partition this broker leads
// or follows, the last high watermark it knew. The replica manager writes
// it every highWatermarkCheckpointInterval when something changed (Kafka's
// replica.high.watermark.checkpoint.interval.ms) and on clean shutdown, and
// reads it once at startup: each partition starts from its checkpointed
// high watermark (never above its log end) instead of 0. So a restarted
// leader serves consumers up to it at once rather than after every ISR
// follower's first fetch, and a restarted follower whose leader cannot
// answer by epoch truncates to it rather than to 0.
//
// The format is Kafka's, text:
//
//	0               version
//	2               number of entries
//	orders 0 1234   topic, partition, high watermark
//	orders 1 987
//
// It is replaced atomically (temp file, fsync, rename, fsync of the
// directory). A file that does not parse — torn by a crash of the
// filesystem, truncated, edited — is reported and ignored: the broker starts
// as if there were none, which is safe, only slower to serve.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"millrace/broker/cluster"
	"millrace/broker/log"
	"millrace/internal/durable"
)

const (
	// HighWatermarkCheckpointFile is the checkpoint's name in the log
	// directory.
	HighWatermarkCheckpointFile = "replication-offset-checkpoint"
	// highWatermarkCheckpointVersion is the format version, line 1.
	highWatermarkCheckpointVersion = 0
	// highWatermarkCheckpointInterval is Kafka's default
	// replica.high.watermark.checkpoint.interval.ms.
	highWatermarkCheckpointInterval = 5 * time.Second
)

// writeHighWatermarks atomically replaces path with the given entries.
func writeHighWatermarks(path string, hws map[log.TopicPartition]int64) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", highWatermarkCheckpointVersion, len(hws))
	for tp, hw := range hws {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, hw)
	}
	return durable.WriteFile(path, b.Bytes())
}

// errBadCheckpoint wraps every reason a checkpoint does not parse.
var errBadCheckpoint = errors.New("malformed high-watermark checkpoint")

// readHighWatermarks reads a checkpoint. A missing file is no entries and
// no error; a file that does not parse exactly is an error wrapping
// errBadCheckpoint.
func readHighWatermarks(path string) (map[log.TopicPartition]int64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[log.TopicPartition]int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", errBadCheckpoint, path, fmt.Sprintf(format, args...))
	}
	// Every line ends in a newline: a file cut inside its last line would
	// otherwise read as a smaller offset.
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return nil, bad("does not end with a newline")
	}
	lines := strings.Split(string(data[:len(data)-1]), "\n")
	if len(lines) < 2 || lines[0] != strconv.Itoa(highWatermarkCheckpointVersion) {
		return nil, bad("version line %q", lines[0])
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return nil, bad("announces %q entries, holds %d", lines[1], len(lines)-2)
	}
	out := make(map[log.TopicPartition]int64, n)
	for _, line := range lines[2:] {
		fields := strings.Split(line, " ")
		if len(fields) != 3 || cluster.ValidateTopicName(fields[0]) != nil {
			return nil, bad("entry %q", line)
		}
		p, perr := strconv.ParseInt(fields[1], 10, 32)
		hw, herr := strconv.ParseInt(fields[2], 10, 64)
		if perr != nil || herr != nil || p < 0 || hw < 0 {
			return nil, bad("entry %q", line)
		}
		tp := log.TopicPartition{Topic: fields[0], Partition: int32(p)}
		if _, dup := out[tp]; dup {
			return nil, bad("%s listed twice", tp)
		}
		out[tp] = hw
	}
	return out, nil
}
