package log

import (
	"fmt"
	"regexp"
	"strings"
)

// The two topic settings about the stored batch format: compression.type,
// which the log applies (recompress.go), and message.format.version, which
// it accepts and ignores as Kafka 3.x does.

// CompressionProducer is compression.type's default: keep the producer's codec.
const CompressionProducer = "producer"

// compressionCodecs maps each compression.type value Kafka accepts
// (BrokerCompressionType's names) to the codec batches are stored with;
// -1 for "producer", which keeps the batch's own.
var compressionCodecs = map[string]int{
	CompressionProducer: -1,
	"uncompressed":      codecNone,
	"gzip":              codecGzip,
	"snappy":            codecSnappy,
	"lz4":               codecLZ4,
	"zstd":              codecZstd,
}

const compressionTypeList = "producer, uncompressed, gzip, snappy, lz4, zstd"

// targetCodec is the codec compression.type stores batches with, or -1
// for "producer" (and for a value Validate would refuse).
func (c Config) targetCodec() int {
	codec, ok := compressionCodecs[c.CompressionType]
	if !ok {
		return -1
	}
	return codec
}

// DefaultMessageFormatVersion is message.format.version's default in Kafka
// 3.x, the value it reports whatever is set once the inter-broker protocol
// is 3.0 or later.
const DefaultMessageFormatVersion = "3.0-IV1"

// messageFormatVersions matches the versions Kafka 3.x's validator
// accepts: a release from 0.8.0 to 3.9, optionally with further version
// components ("0.10.0.0", librdkafka's tests set it) or an inter-broker
// protocol suffix ("3.0-IV1").
var messageFormatVersions = regexp.MustCompile(`^(0\.(8\.[0-2]|9\.0|10\.[0-2]|11\.0)|1\.[01]|2\.[0-8]|3\.[0-9])(\.[0-9]+)*(-IV[0-9]+)?$`)

// checkMessageFormatVersion accepts what Kafka 3.x accepts for
// message.format.version; the value is kept only to be reported.
func checkMessageFormatVersion(v string) error {
	if !messageFormatVersions.MatchString(v) {
		return fmt.Errorf("%q is not a Kafka version (e.g. 0.10.0, 2.8, 3.0-IV1); it is deprecated and ignored: batches are stored in the v2 format", v)
	}
	return nil
}

// MessageFormatBeforeV2 reports whether a message.format.version names a
// format older than the v2 record batch (releases before 0.11.0), the
// values Kafka 3.x warns about when a topic sets them.
func MessageFormatBeforeV2(v string) bool {
	for _, old := range []string{"0.8.", "0.9.", "0.10."} {
		if strings.HasPrefix(v, old) {
			return true
		}
	}
	return false
}
