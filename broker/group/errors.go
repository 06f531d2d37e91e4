package group

// Kafka protocol error codes the coordinator answers with. They are response
// data, never Go errors: a client sees them in the ErrorCode fields and reacts
// (rejoin, refresh the coordinator, retry). Values are fixed by the protocol.
const (
	errNone                      int16 = 0
	errUnknownServerError        int16 = -1
	errUnknownTopicOrPartition   int16 = 3
	errOffsetMetadataTooLarge    int16 = 12
	errCoordinatorNotAvailable   int16 = 15
	errNotCoordinator            int16 = 16
	errIllegalGeneration         int16 = 22
	errInconsistentGroupProtocol int16 = 23
	errInvalidCommitOffsetSize   int16 = 28
	errInvalidGroupID            int16 = 24
	errUnknownMemberID           int16 = 25
	errInvalidSessionTimeout     int16 = 26
	errRebalanceInProgress       int16 = 27
	errUnsupportedVersion        int16 = 35
	errInvalidRequest            int16 = 42
	errInvalidProducerEpoch      int16 = 47
	errNonEmptyGroup             int16 = 68
	errGroupIDNotFound           int16 = 69
	errMemberIDRequired          int16 = 79
	errGroupMaxSizeReached       int16 = 81
	errFencedInstanceID          int16 = 82
	errGroupSubscribedToTopic    int16 = 86
	errUnstableOffsetCommit      int16 = 88
)
