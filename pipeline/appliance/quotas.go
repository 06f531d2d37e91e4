package appliance

// Client quotas of `millrace up` (issue 41): on its embedded broker the
// appliance sets quotas on its own clients, so that a sink replaying a
// topic from the start, or an open console, cannot take the broker from
// the beacon's and the tailers' produce path. The agents get none by
// default: their records are the pipeline's input, and throttling them
// only moves the backlog into their buffers.
//
// Entities: with security off every client is ANONYMOUS, so quotas go on
// client IDs (the sinks' millrace-sink, the console's millrace-monitor,
// the agents' ship.client_id); with security on, on the users each part
// authenticates as (millrace-sink, millrace-console, millrace-beacon and
// millrace-tail), which cover all of that part's clients. With brokers:
// (an external cluster) up sets none: that cluster's quotas are its
// operators'.
//
// An operator's own change wins. Up remembers what it set last in
// <data>/quotas-applied.json and, per entity and quota, changes a value
// only while it is up's: unset and never set by up, still the value up set
// last, or already the value up's config asks for. A value changed or
// deleted with `millrace quota` is left alone (and logged at start) until
// it is set back to the value up's config asks for. quotas: off removes
// the quotas that are still up's.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.yaml.in/yaml/v3"

	"millrace/agents/ship"
	"millrace/broker/quota"
)

// The appliance's default quotas, for one machine.
const (
	// DefaultSinkConsumerByteRate bounds what the sinks together fetch:
	// 64 MiB/s lands a day of a busy service's logs in minutes and
	// leaves the disk and the network to the produce path.
	DefaultSinkConsumerByteRate = 64 << 20
	// DefaultSinkRequestPercentage bounds the broker time the sinks'
	// requests take to one request handler's (one core's) worth.
	DefaultSinkRequestPercentage = 100
	// DefaultConsoleRequestPercentage bounds the console's (and top's)
	// reads of the cluster to a quarter of a core.
	DefaultConsoleRequestPercentage = 25
)

// Client IDs the appliance's parts use; quotas go on them when security
// is off.
const (
	// sinkClientID is the sinks' fetching clients' (sinks/lake worker.go).
	sinkClientID = "millrace-sink"
	// consoleClientID is the console's and top's (pipeline/monitor).
	consoleClientID = "millrace-monitor"
)

// quotasAppliedFile, in the data directory, records what up set last.
const quotasAppliedFile = "quotas-applied.json"

// QuotasConfig is the client quotas up sets on its embedded broker
// (`quotas:`), per group of clients, each a map of Kafka's quota names
// (producer_byte_rate, consumer_byte_rate, request_percentage,
// controller_mutation_rate) to values. A group left out keeps its
// defaults; a group given replaces them ({} sets none). `quotas: off`
// sets none.
type QuotasConfig struct {
	// Off (quotas: off) sets no quota, and removes those still up's.
	Off bool
	// Sinks are the sinks' quotas. Default consumer_byte_rate 64 MiB/s
	// (67108864) and request_percentage 100.
	Sinks map[string]float64
	// Console is the console's and `millrace top`'s. Default
	// request_percentage 25.
	Console map[string]float64
	// Agents are the beacon's and the tailers'. Default none.
	Agents map[string]float64
}

// quotaGroups names the groups as the YAML does, in order.
var quotaGroups = []string{"sinks", "console", "agents"}

// UnmarshalYAML takes `quotas: off` (or on: the defaults) or a mapping of
// groups, refusing unknown groups.
func (q *QuotasConfig) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind == yaml.ScalarNode {
		var on bool
		if err := node.Decode(&on); err != nil {
			return fmt.Errorf("quotas: %q is neither off nor a mapping of groups (%s)", node.Value, strings.Join(quotaGroups, ", "))
		}
		*q = QuotasConfig{Off: !on}
		return nil
	}
	var groups map[string]map[string]float64
	if err := node.Decode(&groups); err != nil {
		return fmt.Errorf("quotas: %w", err)
	}
	*q = QuotasConfig{}
	for name, values := range groups {
		if values == nil {
			values = map[string]float64{} // `sinks:` with nothing: none
		}
		switch name {
		case "sinks":
			q.Sinks = values
		case "console":
			q.Console = values
		case "agents":
			q.Agents = values
		default:
			return fmt.Errorf("quotas: %q is no group; the groups are %s", name, strings.Join(quotaGroups, ", "))
		}
	}
	return nil
}

// MarshalYAML writes the section as UnmarshalYAML reads it back: false
// for off, nothing for the defaults, else the groups given.
func (q QuotasConfig) MarshalYAML() (any, error) {
	if q.Off {
		return false, nil
	}
	if !q.given() {
		return nil, nil
	}
	groups := map[string]map[string]float64{}
	for name, values := range map[string]map[string]float64{"sinks": q.Sinks, "console": q.Console, "agents": q.Agents} {
		if values != nil {
			groups[name] = values
		}
	}
	return groups, nil
}

// groups is each group's values with the defaults filled in.
func (q QuotasConfig) groups() map[string]map[string]float64 {
	orDefault := func(v, d map[string]float64) map[string]float64 {
		if v != nil {
			return v
		}
		return d
	}
	return map[string]map[string]float64{
		"sinks":   orDefault(q.Sinks, map[string]float64{string(quota.ConsumerByteRate): DefaultSinkConsumerByteRate, string(quota.RequestPercentage): DefaultSinkRequestPercentage}),
		"console": orDefault(q.Console, map[string]float64{string(quota.RequestPercentage): DefaultConsoleRequestPercentage}),
		"agents":  orDefault(q.Agents, map[string]float64{}),
	}
}

// given reports whether a group was set in the file.
func (q QuotasConfig) given() bool { return q.Sinks != nil || q.Console != nil || q.Agents != nil }

// validate checks the quota names and values as the broker would
// (AlterClientQuotas), so a typo fails at start with its group named.
func (q QuotasConfig) validate(external bool) []error {
	var errs []error
	if external && q.given() {
		errs = append(errs, errors.New("quotas: up sets quotas on its embedded broker only; with brokers: set them with millrace quota set"))
	}
	groups := q.groups()
	for _, g := range quotaGroups {
		for _, name := range slices.Sorted(maps.Keys(groups[g])) {
			v := groups[g][name]
			switch k := quota.Kind(name); {
			case !slices.Contains(quota.Kinds, k):
				errs = append(errs, fmt.Errorf("quotas.%s: %q is not a quota; the quotas are %s", g, name, kindNames()))
			case v < 0 || math.IsNaN(v) || math.IsInf(v, 0):
				errs = append(errs, fmt.Errorf("quotas.%s.%s: %v is not a quota (zero or more)", g, name, v))
			case (k == quota.ProducerByteRate || k == quota.ConsumerByteRate) && v != math.Trunc(v):
				errs = append(errs, fmt.Errorf("quotas.%s.%s: %v is not a whole number of bytes per second", g, name, v))
			}
		}
	}
	return errs
}

func kindNames() string {
	names := make([]string, len(quota.Kinds))
	for i, k := range quota.Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// quotaEntity is a user or a client ID ("" for none): the appliance's
// entities are never defaults.
type quotaEntity struct {
	User     string `json:"user,omitempty"`
	ClientID string `json:"client_id,omitempty"`
}

func (e quotaEntity) String() string {
	if e.User != "" {
		return "user=" + e.User
	}
	return "client-id=" + e.ClientID
}

// quotaValues are one entity's quotas by kind.
type quotaValues map[quota.Kind]float64

// wantedQuotas are the quotas cfg asks for, by entity: on users with
// security on, on client IDs without.
func (c Config) wantedQuotas() map[quotaEntity]quotaValues {
	want := map[quotaEntity]quotaValues{}
	if c.Quotas.Off {
		return want
	}
	agentClientID := c.Ship.ClientID
	if agentClientID == "" {
		agentClientID = ship.DefaultClientID
	}
	entities := map[string][]quotaEntity{
		"sinks":   {{ClientID: sinkClientID}},
		"console": {{ClientID: consoleClientID}},
		"agents":  {{ClientID: agentClientID}},
	}
	if c.Secure {
		entities = map[string][]quotaEntity{
			"sinks":   {{User: SinkUser}},
			"console": {{User: ConsoleUser}},
			"agents":  {{User: BeaconUser}, {User: TailUser}},
		}
	}
	for g, values := range c.Quotas.groups() {
		if len(values) == 0 {
			continue
		}
		for _, e := range entities[g] {
			if want[e] == nil {
				want[e] = quotaValues{}
			}
			for name, v := range values {
				want[e][quota.Kind(name)] = v
			}
		}
	}
	return want
}

// quotaChange is one quota to set (Remove false) or remove.
type quotaChange struct {
	Entity quotaEntity
	Kind   quota.Kind
	Value  float64
	Remove bool
}

// planQuotas decides, from what up wants, what it set last and what the
// broker holds, the changes to make, what to record as up's, and the
// quotas left as an operator set them (one sentence each). A quota is
// up's while it is unset and never set by up, still the value up set
// last, or already the value wanted; only those are changed.
func planQuotas(want, last, current map[quotaEntity]quotaValues) (changes []quotaChange, record map[quotaEntity]quotaValues, kept []string) {
	record = map[quotaEntity]quotaValues{}
	entities := map[quotaEntity]bool{}
	for e := range want {
		entities[e] = true
	}
	for e := range last {
		entities[e] = true
	}
	sorted := slices.SortedFunc(maps.Keys(entities), func(a, b quotaEntity) int { return strings.Compare(a.String(), b.String()) })
	note := func(e quotaEntity, k quota.Kind, v float64) {
		if record[e] == nil {
			record[e] = quotaValues{}
		}
		record[e][k] = v
	}
	for _, e := range sorted {
		for _, k := range quota.Kinds {
			w, hasW := want[e][k]
			l, hasL := last[e][k]
			c, hasC := current[e][k]
			ours := (!hasL && !hasC) || (hasL && hasC && c == l) || (hasW && hasC && c == w)
			switch {
			case ours && hasW:
				if !hasC || c != w {
					changes = append(changes, quotaChange{Entity: e, Kind: k, Value: w})
				}
				note(e, k, w)
			case ours && hasC:
				changes = append(changes, quotaChange{Entity: e, Kind: k, Remove: true})
			case !ours:
				if hasL && (hasC || hasW) {
					note(e, k, l) // so that it is known as an operator's next time too
				}
				if hasW {
					now := "removed"
					if hasC {
						now = fmt.Sprintf("set to %v", c)
					}
					kept = append(kept, fmt.Sprintf("%s of %s was %s with millrace quota; up leaves it (its config asks for %v; set it to that to hand it back)", k, e, now, w))
				}
			}
		}
	}
	return changes, record, kept
}

// applyQuotas sets the configured quotas on the embedded broker through
// its AlterClientQuotas API, as planQuotas decides, and records what it
// set. Nothing with an external cluster.
func (a *Appliance) applyQuotas(ctx context.Context) error {
	if a.broker == nil {
		return nil
	}
	want := a.cfg.wantedQuotas()
	path := filepath.Join(a.cfg.Data, quotasAppliedFile)
	last, err := readAppliedQuotas(path)
	if err != nil {
		return err
	}
	if len(want) == 0 && len(last) == 0 {
		return nil
	}
	adm, err := a.admin()
	if err != nil {
		return err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	described, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		return fmt.Errorf("quotas: reading the broker's quotas: %w", err)
	}
	changes, record, kept := planQuotas(want, last, brokerQuotas(described))
	for _, k := range kept {
		a.logger.Info("quota left as set by an operator", "quota", k)
	}
	if len(changes) > 0 {
		entries := make([]kadm.AlterClientQuotaEntry, 0, len(changes))
		for _, c := range changes {
			entries = append(entries, kadm.AlterClientQuotaEntry{Entity: c.Entity.kadm(),
				Ops: []kadm.AlterClientQuotaOp{{Key: string(c.Kind), Value: c.Value, Remove: c.Remove}}})
		}
		altered, err := adm.AlterClientQuotas(ctx, entries)
		if err != nil {
			return fmt.Errorf("quotas: setting the appliance's quotas: %w", err)
		}
		for _, r := range altered {
			if r.Err != nil {
				return fmt.Errorf("quotas: setting the quotas of %v: %w (%s)", r.Entity, r.Err, r.ErrMessage)
			}
		}
		a.logger.Info("client quotas set", "changes", len(changes))
	}
	return writeAppliedQuotas(path, record)
}

// kadm is the entity as kadm names it.
func (e quotaEntity) kadm() kadm.ClientQuotaEntity {
	var out kadm.ClientQuotaEntity
	if e.User != "" {
		out = append(out, kadm.ClientQuotaEntityComponent{Type: "user", Name: &e.User})
	}
	if e.ClientID != "" {
		out = append(out, kadm.ClientQuotaEntityComponent{Type: "client-id", Name: &e.ClientID})
	}
	return out
}

// brokerQuotas are the described quotas of the entities of one named user
// or one named client ID, the only shapes up sets.
func brokerQuotas(described []kadm.DescribedClientQuota) map[quotaEntity]quotaValues {
	out := map[quotaEntity]quotaValues{}
	for _, d := range described {
		if len(d.Entity) != 1 || d.Entity[0].Name == nil {
			continue
		}
		var e quotaEntity
		switch d.Entity[0].Type {
		case "user":
			e.User = *d.Entity[0].Name
		case "client-id":
			e.ClientID = *d.Entity[0].Name
		default:
			continue
		}
		values := quotaValues{}
		for _, v := range d.Values {
			values[quota.Kind(v.Key)] = v.Value
		}
		out[e] = values
	}
	return out
}

// appliedEntry is one entity of quotas-applied.json.
type appliedEntry struct {
	quotaEntity
	Quotas quotaValues `json:"quotas"`
}

// readAppliedQuotas reads what up set last; none when the file is missing.
func readAppliedQuotas(path string) (map[quotaEntity]quotaValues, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("quotas: %w", err)
	}
	var entries []appliedEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("quotas: %s is damaged (%v); remove it, and up takes the quotas it finds as an operator's", path, err)
	}
	out := make(map[quotaEntity]quotaValues, len(entries))
	for _, e := range entries {
		out[e.quotaEntity] = e.Quotas
	}
	return out, nil
}

// writeAppliedQuotas replaces path with record, atomically.
func writeAppliedQuotas(path string, record map[quotaEntity]quotaValues) error {
	entries := make([]appliedEntry, 0, len(record))
	for e, v := range record {
		entries = append(entries, appliedEntry{e, v})
	}
	slices.SortFunc(entries, func(a, b appliedEntry) int { return strings.Compare(a.String(), b.String()) })
	data, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("quotas: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("quotas: %w", err)
	}
	return nil
}
