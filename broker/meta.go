package broker

// The data directory's identity, Kafka's meta.properties:
//
//	version=0
//	broker.id=1
//	cluster.id=<22 characters>
//
// written once the broker first opened its data against a coordination
// store, and checked on every later start. At startup a broker deletes the
// partition logs its cluster's metadata does not give it (cluster.Open), so
// a data directory opened by another broker ID, or against another cluster
// (a wrong ZooKeeper address or chroot, a lost embedded store), is refused
// instead of emptied.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"millrace/internal/durable"
)

const metaFile = "meta.properties"

// dataMeta is what meta.properties records.
type dataMeta struct {
	BrokerID  int32
	ClusterID string
}

// readMeta reads dir's meta.properties; ok is false when there is none.
func readMeta(dir string) (m dataMeta, ok bool, err error) {
	path := filepath.Join(dir, metaFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	values := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		values[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	id, err := strconv.ParseInt(values["broker.id"], 10, 32)
	if err != nil || values["cluster.id"] == "" {
		return m, false, fmt.Errorf("broker: %s names no broker.id and cluster.id; fix or remove it", path)
	}
	return dataMeta{BrokerID: int32(id), ClusterID: values["cluster.id"]}, true, nil
}

// writeMeta writes dir's meta.properties.
func writeMeta(dir string, m dataMeta) error {
	path := filepath.Join(dir, metaFile)
	data := fmt.Sprintf("version=0\nbroker.id=%d\ncluster.id=%s\n", m.BrokerID, m.ClusterID)
	return durable.WriteFile(path, []byte(data))
}
