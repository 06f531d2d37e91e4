package group

import (
	"errors"
	"fmt"

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
// single path components (see coord.EscapeName).
const consumersRoot = "/consumers"

func groupPath(group string) string { return consumersRoot + "/" + coord.EscapeName(group) }

func offsetsPath(group string) string { return groupPath(group) + "/offsets" }

func offsetTopicPath(group, topic string) string {
	return offsetsPath(group) + "/" + coord.EscapeName(topic)
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
