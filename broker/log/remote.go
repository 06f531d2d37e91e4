package log

// The one thing the log knows of tiered storage (broker/tier, KIP-405):
// how far its records are stored remotely. Everything remote — uploads,
// the remote state, remote reads — lives in broker/tier, which tells the
// log with SetRemoteEnd after each recorded upload; retention (retention.go)
// then deletes a segment of a remote.storage.enable log locally only once
// it lies wholly below that offset, and by local.retention.* instead of
// retention.*. The offset is not persisted: after a restart it is 0 until
// the tier has read the remote state again, so nothing is deleted early.
//
// A broker with tiered storage off (WithRemoteStorageSystem(false)) never
// sets it, so a log whose topic still has remote.storage.enable=true
// (tiering was turned off on the broker, or the topic's config came from
// a broker that had it) would keep every segment forever. Kafka's
// UnifiedLog treats such a log as untiered (isRemoteLogEnabled needs the
// broker's remote.log.storage.system.enable as well as the topic's
// setting); so does retention here: retention.ms and retention.bytes
// delete locally, as if the topic were not tiered, with a warning once.

// SetRemoteEnd records that every record below offset is stored remotely
// (the remote state's last offset plus one). It only moves forward.
func (l *Log) SetRemoteEnd(offset int64) {
	for {
		cur := l.remoteEnd.Load()
		if offset <= cur || l.remoteEnd.CompareAndSwap(cur, offset) {
			return
		}
	}
}

// RemoteEnd is the offset below which every record is stored remotely, as
// last told by SetRemoteEnd; 0 before.
func (l *Log) RemoteEnd() int64 { return l.remoteEnd.Load() }

// tiered reports whether retention treats the log, under cfg, as tiered:
// its topic sets remote.storage.enable and the broker has tiering on.
func (l *Log) tiered(cfg Config) bool {
	if !cfg.RemoteStorageEnable {
		return false
	}
	if !l.untiered {
		return true
	}
	if !l.toldUntiered.Swap(true) {
		l.logger.Warn("remote.storage.enable=true on a broker with remote.log.storage.system.enable=false: " +
			"local retention deletes by retention.ms and retention.bytes, as for an untiered topic; " +
			"turn tiered storage back on for the broker, or set remote.storage.enable=false on the topic")
	}
	return false
}
