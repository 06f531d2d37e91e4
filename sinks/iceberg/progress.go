package iceberg

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/iceberg-go/table"
)

// Snapshot summary properties millrace writes on every commit.
const (
	// offsetsPrefix + "<group>.<topic>" holds, for every partition of the
	// topic the group has landed, the next offset to land, as
	// "<partition>:<offset>" pairs joined by commas, in partition order
	// ("0:1200,1:988"). Every commit carries the whole map, so the newest
	// snapshot that has the property is the whole truth.
	offsetsPrefix = "millrace.offsets."
	// watermarksPrefix + "<group>.<topic>" holds the deduplication
	// watermarks, opaque to this package, by partition, as a JSON object
	// {"<partition>": "<watermark>"}.
	watermarksPrefix = "millrace.watermarks."
	// commitIDProperty holds a random ID of the commit attempt, by which a
	// commit whose outcome the catalog left unknown finds itself.
	commitIDProperty = "millrace.commit-id"
)

// Progress is what a group has landed of a topic in the table: the next
// offset and the deduplication watermark of each partition.
type Progress struct {
	// Offsets maps a partition to the next offset to land.
	Offsets map[int32]int64
	// Watermarks maps a partition to its deduplication watermark, opaque here.
	Watermarks map[int32]string
	// SnapshotID is the snapshot it was read from; 0 when no snapshot has it.
	SnapshotID int64
}

func offsetsKey(group, topic string) string    { return offsetsPrefix + group + "." + topic }
func watermarksKey(group, topic string) string { return watermarksPrefix + group + "." + topic }

// ReadProgress returns group's progress on topic as the newest snapshot of
// tbl's main branch that records it says; an empty Progress when none does.
// Snapshots without it (another group's commits) are skipped; when expiry
// has cut the branch's history short of it, the group's offsets tag
// (OffsetsTag) points at it.
func ReadProgress(tbl *table.Table, group, topic string) (Progress, error) {
	meta := tbl.Metadata()
	for s := meta.SnapshotByName(table.MainBranch); s != nil; {
		if s.Summary != nil {
			if enc, ok := s.Summary.Properties[offsetsKey(group, topic)]; ok {
				return decodeProgress(s, enc, s.Summary.Properties[watermarksKey(group, topic)])
			}
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	// The walk ends at the oldest snapshot expiry kept on the branch; the
	// group's offsets snapshot, if older, is kept under its tag (Expire).
	if s := meta.SnapshotByName(OffsetsTag(group, topic)); s != nil && s.Summary != nil {
		if enc, ok := s.Summary.Properties[offsetsKey(group, topic)]; ok {
			return decodeProgress(s, enc, s.Summary.Properties[watermarksKey(group, topic)])
		}
	}
	return Progress{Offsets: map[int32]int64{}, Watermarks: map[int32]string{}}, nil
}

func decodeProgress(s *table.Snapshot, offsets, watermarks string) (Progress, error) {
	p := Progress{Offsets: map[int32]int64{}, Watermarks: map[int32]string{}, SnapshotID: s.SnapshotID}
	var err error
	if p.Offsets, err = decodeOffsets(offsets); err != nil {
		return Progress{}, fmt.Errorf("iceberg: snapshot %d: %w", s.SnapshotID, err)
	}
	if watermarks != "" {
		var byName map[string]string
		if err := json.Unmarshal([]byte(watermarks), &byName); err != nil {
			return Progress{}, fmt.Errorf("iceberg: snapshot %d: watermarks: %w", s.SnapshotID, err)
		}
		for k, v := range byName {
			part, err := strconv.ParseInt(k, 10, 32)
			if err != nil {
				return Progress{}, fmt.Errorf("iceberg: snapshot %d: watermark of partition %q", s.SnapshotID, k)
			}
			p.Watermarks[int32(part)] = v
		}
	}
	return p, nil
}

// encodeOffsets writes offsets as "0:1200,1:988", in partition order.
func encodeOffsets(offsets map[int32]int64) string {
	var b strings.Builder
	for i, part := range slices.Sorted(maps.Keys(offsets)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(part)))
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(offsets[part], 10))
	}
	return b.String()
}

func decodeOffsets(s string) (map[int32]int64, error) {
	offsets := map[int32]int64{}
	if s == "" {
		return offsets, nil
	}
	for pair := range strings.SplitSeq(s, ",") {
		p, o, ok := strings.Cut(pair, ":")
		part, err1 := strconv.ParseInt(p, 10, 32)
		offset, err2 := strconv.ParseInt(o, 10, 64)
		if !ok || err1 != nil || err2 != nil || part < 0 || offset < 0 {
			return nil, fmt.Errorf("offsets: bad pair %q in %q", pair, s)
		}
		offsets[int32(part)] = offset
	}
	return offsets, nil
}

// encodeWatermarks writes watermarks as a JSON object keyed by partition
// (json.Marshal sorts the keys, so equal maps encode alike). A watermark
// must be UTF-8 text: JSON would replace other bytes.
func encodeWatermarks(w map[int32]string) (string, error) {
	byName := make(map[string]string, len(w))
	for part, v := range w {
		if !utf8.ValidString(v) {
			return "", fmt.Errorf("iceberg: the watermark of partition %d is not UTF-8 text", part)
		}
		byName[strconv.Itoa(int(part))] = v
	}
	b, err := json.Marshal(byName)
	return string(b), err
}
