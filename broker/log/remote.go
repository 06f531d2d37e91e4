package log

// The one thing the log knows of tiered storage (broker/tier, KIP-405):
// how far its records are stored remotely. Everything remote — uploads,
// the remote state, remote reads — lives in broker/tier, which tells the
// log with SetRemoteEnd after each recorded upload; retention (retention.go)
// then deletes a segment of a remote.storage.enable log locally only once
// it lies wholly below that offset, and by local.retention.* instead of
// retention.*. The offset is not persisted: after a restart it is 0 until
// the tier has read the remote state again, so nothing is deleted early.

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
