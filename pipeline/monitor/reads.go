package monitor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AnswerTimeout is how long the monitor's and the CLI's clients wait for a
// broker to answer, beyond the time the request itself allows the broker.
// A hung broker (stopped, or stuck on its disk) keeps accepting connections
// until its ZooKeeper session expires; without this bound every request to
// it waits franz-go's default 10 s, and a seed list that starts with it
// fails the whole command. After it, a request any broker can answer
// (metadata) goes to the next one.
const AnswerTimeout = 3 * time.Second

// ReadTimeout bounds each read of a status view that kadm sends where the
// metadata says (offsets to the partition leaders, groups to their
// coordinators, reassignments to the controller): a hung broker leaves its
// figures out rather than holding up the whole view. It is twice
// AnswerTimeout because kadm looks the metadata up first, and that lookup
// may wait on the hung broker before another answers.
const ReadTimeout = 2 * AnswerTimeout

// ClientOpts are the options the monitor's and the CLI's clients share.
func ClientOpts() []kgo.Opt {
	return []kgo.Opt{kgo.RequestTimeoutOverhead(AnswerTimeout), kgo.DialTimeout(AnswerTimeout)}
}

// ReadLogDirs asks each of the brokers, in parallel, to describe its log
// directories (the partitions of s; all of them when s is nil), waiting at
// most AnswerTimeout. It returns the answers it got; the error names the
// brokers that did not answer. Unlike kadm's DescribeAllLogDirs it does not
// look the metadata up first (the client knows the brokers from the
// caller's), which a hung broker could hold up.
func ReadLogDirs(ctx context.Context, adm *kadm.Client, brokers []int32, s kadm.TopicsSet) (kadm.DescribedAllLogDirs, error) {
	ctx, cancel := context.WithTimeout(ctx, AnswerTimeout)
	defer cancel()
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		failed = map[int32]error{}
	)
	all := kadm.DescribedAllLogDirs{}
	brokers = slices.Compact(slices.Sorted(slices.Values(brokers)))
	for _, id := range brokers {
		wg.Go(func() {
			dirs, err := adm.DescribeBrokerLogDirs(ctx, id, s)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[id] = err
				return
			}
			all[id] = dirs
		})
	}
	wg.Wait()
	var msgs []string
	for _, id := range brokers {
		if err := failed[id]; err != nil {
			msgs = append(msgs, fmt.Sprintf("broker %d: %v", id, err))
		}
	}
	if len(msgs) > 0 {
		return all, errors.New(strings.Join(msgs, "; "))
	}
	return all, nil
}

// Ping asks every seed broker at once for the cluster's brokers and returns
// when the first one answers, so a hung seed does not hold up the others
// (franz-go's Client.Ping asks them one after another). When none answers
// the error is the last one's.
func Ping(ctx context.Context, cl *kgo.Client) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the slower requests end with it
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return errors.New("no seed brokers")
	}
	answers := make(chan error, len(seeds))
	for _, b := range seeds {
		go func() {
			req := kmsg.NewPtrMetadataRequest()
			req.Topics = []kmsg.MetadataRequestTopic{}
			_, err := b.Request(ctx, req)
			answers <- err
		}()
	}
	var err error
	for range seeds {
		if err = <-answers; err == nil {
			return nil
		}
	}
	return err
}
