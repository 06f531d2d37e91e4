package group

// APIVersions is the range of versions the coordinator serves for one Kafka API
// key. The wire server advertises exactly these in ApiVersions.
type APIVersions struct {
	Key int16 // Kafka API key
	Min int16 // lowest version served
	Max int16 // highest version served
}

// Kafka API keys of the requests the coordinator serves.
const (
	keyOffsetCommit    int16 = 8
	keyOffsetFetch     int16 = 9
	keyJoinGroup       int16 = 11
	keyHeartbeat       int16 = 12
	keyLeaveGroup      int16 = 13
	keySyncGroup       int16 = 14
	keyDescribeGroups  int16 = 15
	keyListGroups      int16 = 16
	keyTxnOffsetCommit int16 = 28
	keyDeleteGroups    int16 = 42
	keyOffsetDelete    int16 = 47
)

// versions lists every served API once. OffsetCommit and OffsetFetch stop at
// v9: v10 addresses topics by topic ID (KIP-848), which the coordinator cannot
// resolve. DescribeGroups v6 (KIP-1043 error message), ListGroups v5 (type
// filter; every millrace group is "classic") and DeleteGroups v3 (error message)
// are plain extensions and are served. TxnOffsetCommit stops at v3: v4+
// (KIP-890 part 2) lets the producer skip AddOffsetsToTxn, which needs the
// coordinator to verify the transaction with the transaction coordinator.
var versions = []APIVersions{
	{keyOffsetCommit, 0, 9},
	{keyOffsetFetch, 0, 9},
	{keyJoinGroup, 0, 9},
	{keyHeartbeat, 0, 4},
	{keyLeaveGroup, 0, 5},
	{keySyncGroup, 0, 5},
	{keyDescribeGroups, 0, 6},
	{keyListGroups, 0, 5},
	{keyTxnOffsetCommit, 0, 3},
	{keyDeleteGroups, 0, 3},
	{keyOffsetDelete, 0, 0},
}

// Versions returns the API versions the coordinator serves, one entry per API
// key. The slice is a copy; callers may keep or modify it.
func Versions() []APIVersions {
	return append([]APIVersions(nil), versions...)
}

// supported reports whether version of the API key is served.
func supported(key, version int16) bool {
	for _, v := range versions {
		if v.Key == key {
			return version >= v.Min && version <= v.Max
		}
	}
	return false
}
