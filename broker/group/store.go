package group

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"millrace/broker/coord"
)

// Store layout (docs/architecture.md §4):
//
//	/consumers/<group>                                persistent, empty
//	/consumers/<group>/offsets/<topic>/<partition>    persistent: committed offset (offsetEntry JSON)
//	/consumers/<group>/ids/<member>                   ephemeral: member mirror (memberNode JSON)
//	/consumers/<group>/owners/<topic>/<partition>     ephemeral: owning member ID
//	/consumers/<group>/coordinator                    persistent, empty: its version fences offset writes (with Config.Owner)
//	/consumers/<group>/txn-offsets/<producer ID>      persistent: pending transactional offsets (pendingTxnOffsets JSON)
//	/txn-offsets/<producer ID>                        persistent: the producer's highest epoch ({"producer_epoch":N})
//	/txn-offsets/<producer ID>/<group>                persistent, empty: the group holds its pending offsets
//
// Group IDs are arbitrary strings, so group and topic names are escaped into
// single path components (see escapeName).
const consumersRoot = "/consumers"

// escapeName turns a group or topic name into one valid path component:
// '%', '/', control characters, invalid UTF-8 and the code points ZooKeeper
// reserves become %XX per byte, and the names "", "." and ".." are escaped
// entirely. Kafka topic names never need escaping, so the common case reads
// naturally in the store.
func escapeName(s string) string {
	if s == "" {
		return "%"
	}
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	var b strings.Builder
	for i, r := range s {
		size := utf8.RuneLen(r)
		if r == utf8.RuneError {
			_, size = utf8.DecodeRuneInString(s[i:])
		}
		if r == '%' || r == '/' || r < 0x20 || r == 0x7f || r == utf8.RuneError ||
			(r >= 0xd800 && r <= 0xf8ff) || (r >= 0xfff0 && r <= 0xffff) {
			for _, ch := range []byte(s[i : i+size]) {
				fmt.Fprintf(&b, "%%%02X", ch)
			}
			continue
		}
		b.WriteString(s[i : i+size])
	}
	return b.String()
}

// unescapeName reverses escapeName; ok is false for a name escapeName cannot
// have produced.
func unescapeName(s string) (string, bool) {
	if s == "%" {
		return "", true
	}
	if !strings.Contains(s, "%") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), true
}

func groupPath(group string) string { return consumersRoot + "/" + escapeName(group) }

func offsetsPath(group string) string { return groupPath(group) + "/offsets" }

func offsetTopicPath(group, topic string) string {
	return offsetsPath(group) + "/" + escapeName(topic)
}

func offsetPath(group, topic string, partition int32) string {
	return fmt.Sprintf("%s/%d", offsetTopicPath(group, topic), partition)
}

func idsPath(group string) string { return groupPath(group) + "/ids" }

// coordinatorPath is a group's fence when groups can move between brokers
// (Config.Owner set, as every broker process does): a broker that takes up
// the group's coordination sets the node (bumping its version) before it
// reads the offsets, and its offset writes check that version. So a former
// coordinator's late write fails instead of landing after its successor read
// the offsets, which would then serve an older offset than was committed.
func coordinatorPath(group string) string { return groupPath(group) + "/coordinator" }

func ownersPath(group string) string { return groupPath(group) + "/owners" }

// deleteRecursive removes path and everything below it. Nodes that vanish
// meanwhile are fine; a node that gains a child meanwhile is retried a few
// times before giving up.
func deleteRecursive(store coord.Store, path string) error {
	for attempt := 0; ; attempt++ {
		children, err := store.Children(path)
		if errors.Is(err, coord.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, ch := range children {
			if err := deleteRecursive(store, path+"/"+ch); err != nil {
				return err
			}
		}
		err = store.Delete(path, coord.AnyVersion)
		switch {
		case err == nil || errors.Is(err, coord.ErrNoNode):
			return nil
		case errors.Is(err, coord.ErrNotEmpty) && attempt < 3:
			continue
		default:
			return err
		}
	}
}
