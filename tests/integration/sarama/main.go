// sarama_client drives a Strata broker with Sarama (Debian's
// golang-github-shopify-sarama-dev, built offline in GOPATH mode) and
// checks what it gets back.  test_sarama.py starts the broker, builds and
// runs this program, and reads its output:
//
//	STEP <text>   a stage passed
//	FAIL: <text>  a check failed (exit status 1)
//	ok            every stage passed
//
// Usage: sarama_client BOOTSTRAP KAFKA_VERSION (e.g. 2.1.0)
//
// Stages: admin (create, describe topics and the cluster, list topics),
// produce with each codec Sarama 1.22 sends in a form Kafka accepts (none,
// gzip, snappy, lz4; its zstd goes out in Produce v3, which Kafka refuses),
// a consumer reads back the same keys, values and headers, a group of two
// members that commit, leave, and whose successors resume at the committed
// offsets, and offsets for times (last: Sarama 1.22 leaves a batch's max
// timestamp at -1, so the broker must take it from the records).
package main

import (
	"log"
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

const (
	codecTopic = "sarama-codecs"
	groupTopic = "sarama-group"
	group      = "sarama-group-1"
	groupParts = 4
	perCodec   = 40
	first      = 200
	second     = 80
)

var start = time.Now()

func step(format string, a ...interface{}) {
	fmt.Printf("STEP [%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
}

func fail(format string, a ...interface{}) {
	fmt.Printf("FAIL: %s\n", fmt.Sprintf(format, a...))
	os.Exit(1)
}

func check(cond bool, format string, a ...interface{}) {
	if !cond {
		fail(format, a...)
	}
}

func must(err error, what string) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

func newConfig(version sarama.KafkaVersion, client string) *sarama.Config {
	if os.Getenv("SARAMA_LOG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	}
	c := sarama.NewConfig()
	c.Version = version
	c.ClientID = client
	c.Metadata.Retry.Backoff = 100 * time.Millisecond
	c.Admin.Timeout = 10 * time.Second
	return c
}

type sent struct {
	value     []byte
	codec     string
	partition int32
	offset    int64
	ts        time.Time
}

func adminStage(addrs []string, version sarama.KafkaVersion) {
	admin, err := sarama.NewClusterAdmin(addrs, newConfig(version, "sarama-admin"))
	must(err, "NewClusterAdmin")
	defer admin.Close()
	must(admin.CreateTopic(codecTopic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false),
		"CreateTopic "+codecTopic)
	must(admin.CreateTopic(groupTopic, &sarama.TopicDetail{NumPartitions: groupParts, ReplicationFactor: 1}, false),
		"CreateTopic "+groupTopic)
	err = admin.CreateTopic(codecTopic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false)
	check(err != nil, "creating %s twice succeeded", codecTopic)
	md, err := admin.DescribeTopics([]string{codecTopic, groupTopic})
	must(err, "DescribeTopics")
	parts := map[string]int{}
	for _, t := range md {
		check(t.Err == sarama.ErrNoError, "DescribeTopics %s: %v", t.Name, t.Err)
		parts[t.Name] = len(t.Partitions)
	}
	check(parts[codecTopic] == 3 && parts[groupTopic] == groupParts, "DescribeTopics partitions: %v", parts)
	brokers, controller, err := admin.DescribeCluster()
	must(err, "DescribeCluster")
	// Sarama 1.22 asks with Metadata v0, which has no controller id: -1
	check(len(brokers) == 1 && controller == -1, "DescribeCluster: %d brokers, controller %d",
		len(brokers), controller)
	check(brokers[0].Addr() == addrs[0], "DescribeCluster address %s, want %s", brokers[0].Addr(), addrs[0])
	topics, err := admin.ListTopics()
	must(err, "ListTopics")
	check(topics[codecTopic].NumPartitions == 3 && topics[groupTopic].NumPartitions == groupParts,
		"ListTopics: %v", topics)
	step("admin: created, described (%d broker, controller %d), listed %d topics", len(brokers), controller,
		len(topics))
}

func produceStage(addrs []string, version sarama.KafkaVersion) map[string]*sent {
	codecs := []struct {
		name  string
		codec sarama.CompressionCodec
	}{{"none", sarama.CompressionNone}, {"gzip", sarama.CompressionGZIP},
		{"snappy", sarama.CompressionSnappy}, {"lz4", sarama.CompressionLZ4}}
	out := map[string]*sent{}
	for _, c := range codecs {
		cfg := newConfig(version, "sarama-producer-"+c.name)
		cfg.Producer.Return.Successes = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Compression = c.codec
		cfg.Producer.Flush.Messages = 10
		// With Messages and no Frequency, what a retry puts back (Sarama
		// retries a batch it sent on a connection not yet open, "broker
		// not connected") may stay below 10 and never go: SendMessages
		// then waits for ever.  Sarama's own log warns of it.
		cfg.Producer.Flush.Frequency = 50 * time.Millisecond
		p, err := sarama.NewSyncProducer(addrs, cfg)
		must(err, "NewSyncProducer "+c.name)
		var msgs []*sarama.ProducerMessage
		for i := 0; i < perCodec; i++ {
			k := fmt.Sprintf("%s-%03d", c.name, i)
			v := bytes.Repeat([]byte(fmt.Sprintf("value %s %d ", c.name, i)), 20)
			msgs = append(msgs, &sarama.ProducerMessage{Topic: codecTopic, Key: sarama.StringEncoder(k),
				Value: sarama.ByteEncoder(v), Timestamp: time.Now(),
				Headers: []sarama.RecordHeader{{Key: []byte("codec"), Value: []byte(c.name)}}})
			out[k] = &sent{value: v, codec: c.name}
		}
		must(p.SendMessages(msgs), "SendMessages "+c.name)
		for _, m := range msgs {
			s := out[string(m.Key.(sarama.StringEncoder))]
			s.partition, s.offset, s.ts = m.Partition, m.Offset, m.Timestamp
		}
		must(p.Close(), "producer close")
		time.Sleep(20 * time.Millisecond) // each codec's records younger than the last's
	}
	step("produced %d records with codecs none, gzip, snappy, lz4", len(out))
	return out
}

func consumeStage(addrs []string, version sarama.KafkaVersion, want map[string]*sent) {
	c, err := sarama.NewConsumer(addrs, newConfig(version, "sarama-reader"))
	must(err, "NewConsumer")
	defer c.Close()
	got := map[string]bool{}
	for p := int32(0); p < 3; p++ {
		pc, err := c.ConsumePartition(codecTopic, p, sarama.OffsetOldest)
		must(err, "ConsumePartition")
		n := 0
		for _, s := range want {
			if s.partition == p {
				n++
			}
		}
		for i := 0; i < n; i++ {
			select {
			case m := <-pc.Messages():
				k := string(m.Key)
				s := want[k]
				check(s != nil, "read an unknown key %q", k)
				check(bytes.Equal(m.Value, s.value), "value of %s differs", k)
				check(m.Offset == s.offset, "offset of %s: %d, produced at %d", k, m.Offset, s.offset)
				check(len(m.Headers) == 1 && string(m.Headers[0].Key) == "codec" &&
					string(m.Headers[0].Value) == s.codec, "headers of %s: %v", k, m.Headers)
				got[k] = true
			case err := <-pc.Errors():
				fail("consume partition %d: %v", p, err)
			case <-time.After(10 * time.Second):
				fail("partition %d: read %d of %d records", p, i, n)
			}
		}
		pc.Close()
	}
	check(len(got) == len(want), "read %d of %d records", len(got), len(want))
	step("consumer read every record back with the same key, value, offset and headers")
}

func offsetsForTimesStage(addrs []string, version sarama.KafkaVersion, want map[string]*sent) {
	client, err := sarama.NewClient(addrs, newConfig(version, "sarama-offsets"))
	must(err, "NewClient")
	defer client.Close()
	// the first record of each codec in each partition: every older record
	// of that partition came from an earlier codec
	firstOf := map[string]*sent{}
	for _, s := range want {
		key := fmt.Sprintf("%s/%d", s.codec, s.partition)
		if f := firstOf[key]; f == nil || s.offset < f.offset {
			firstOf[key] = s
		}
	}
	for key, s := range firstOf {
		off, err := client.GetOffset(codecTopic, s.partition, s.ts.UnixNano()/int64(time.Millisecond))
		must(err, "GetOffset "+key)
		check(off == s.offset, "offset for the time of %s's first record: %d, want %d", key, off, s.offset)
	}
	future := time.Now().Add(time.Hour).UnixNano() / int64(time.Millisecond)
	off, err := client.GetOffset(codecTopic, 0, future)
	must(err, "GetOffset in the future")
	end, err := client.GetOffset(codecTopic, 0, sarama.OffsetNewest)
	must(err, "GetOffset newest")
	check(off == -1 || off == end, "offset for a future time: %d (end %d)", off, end)
	step("offsets for times: %d lookups found the first record at or after their time", len(firstOf))
}

// member is one consumer of the group, in its own goroutine.
type member struct {
	name   string
	cg     sarama.ConsumerGroup
	mu     sync.Mutex
	claims map[int32]bool
	read   []string
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims = map[int32]bool{}
	for _, p := range s.Claims()[groupTopic] {
		m.claims[p] = true
	}
	return nil
}

func (m *member) Cleanup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims = map[int32]bool{}
	return nil
}

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		m.mu.Lock()
		if !m.claims[msg.Partition] {
			m.err = fmt.Errorf("%s read partition %d it does not own", m.name, msg.Partition)
		}
		m.read = append(m.read, string(msg.Value))
		m.mu.Unlock()
		s.MarkMessage(msg, "")
	}
	return nil
}

func (m *member) snapshot() (map[int32]bool, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := map[int32]bool{}
	for p := range m.claims {
		c[p] = true
	}
	return c, len(m.read)
}

func startMember(addrs []string, version sarama.KafkaVersion, name string) *member {
	cfg := newConfig(version, name)
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.CommitInterval = 200 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cg, err := sarama.NewConsumerGroup(addrs, group, cfg)
	must(err, "NewConsumerGroup "+name)
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{name: name, cg: cg, cancel: cancel, done: make(chan struct{}), claims: map[int32]bool{}}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{groupTopic}, m); err != nil && ctx.Err() == nil {
				m.mu.Lock()
				m.err = err
				m.mu.Unlock()
				return
			}
		}
	}()
	return m
}

func waitFor(timeout time.Duration, what string, pred func() bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if pred() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	fail("timed out (%v) waiting for %s", timeout, what)
}

// groupRound: two members split the topic, count records are produced,
// the members read them and leave (committing on the way out).
func groupRound(addrs []string, version sarama.KafkaVersion, prod sarama.SyncProducer, from, count int,
	round int) []string {
	ms := []*member{startMember(addrs, version, fmt.Sprintf("sarama-member-%d-a", round)),
		startMember(addrs, version, fmt.Sprintf("sarama-member-%d-b", round))}
	waitFor(40*time.Second, "the two members to split the partitions", func() bool {
		a, _ := ms[0].snapshot()
		b, _ := ms[1].snapshot()
		all := map[int32]bool{}
		for p := range a {
			all[p] = true
			if b[p] {
				return false
			}
		}
		for p := range b {
			all[p] = true
		}
		return len(a) > 0 && len(b) > 0 && len(all) == groupParts
	})
	a, _ := ms[0].snapshot()
	b, _ := ms[1].snapshot()
	step("round %d: group split %d + %d partitions", round, len(a), len(b))
	var msgs []*sarama.ProducerMessage
	for i := from; i < from+count; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: groupTopic, Partition: int32(i % groupParts),
			Key: sarama.StringEncoder(fmt.Sprintf("g%d", i)), Value: sarama.StringEncoder(fmt.Sprintf("g%d", i))})
	}
	must(prod.SendMessages(msgs), "group records")
	waitFor(40*time.Second, fmt.Sprintf("the members to read %d records", count), func() bool {
		_, x := ms[0].snapshot()
		_, y := ms[1].snapshot()
		return x+y >= count
	})
	var read []string
	for _, m := range ms {
		m.cancel()
		<-m.done
		must(m.cg.Close(), "close "+m.name) // commits, then LeaveGroup
		check(m.err == nil, "%s: %v", m.name, m.err)
		_, n := m.snapshot()
		check(n > 0, "%s read nothing", m.name)
		read = append(read, m.read...)
	}
	return read
}

func expect(from, count int) []string {
	var v []string
	for i := from; i < from+count; i++ {
		v = append(v, fmt.Sprintf("g%d", i))
	}
	sort.Strings(v)
	return v
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func groupStage(addrs []string, version sarama.KafkaVersion) {
	cfg := newConfig(version, "sarama-group-producer")
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	prod, err := sarama.NewSyncProducer(addrs, cfg)
	must(err, "group producer")
	defer prod.Close()

	read := groupRound(addrs, version, prod, 0, first, 1)
	sort.Strings(read)
	check(sameStrings(read, expect(0, first)), "round 1 read %d records, want each of %d once", len(read), first)
	step("round 1: the members read each of %d records once", first)

	admin, err := sarama.NewClusterAdmin(addrs, newConfig(version, "sarama-admin"))
	must(err, "NewClusterAdmin")
	defer admin.Close()
	parts := []int32{}
	for p := int32(0); p < groupParts; p++ {
		parts = append(parts, p)
	}
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{groupTopic: parts})
	must(err, "ListConsumerGroupOffsets")
	for _, p := range parts {
		b := resp.GetBlock(groupTopic, p)
		check(b != nil && b.Err == sarama.ErrNoError && b.Offset == first/groupParts,
			"committed offset of partition %d: %+v, want %d", p, b, first/groupParts)
	}
	step("committed offsets are the log end (%d per partition)", first/groupParts)

	read = groupRound(addrs, version, prod, first, second, 2)
	sort.Strings(read)
	check(sameStrings(read, expect(first, second)), "round 2 read %d records, want only the %d new ones",
		len(read), second)
	step("round 2: new members resumed at the committed offsets and read only the %d new records", second)

	groups, err := admin.ListConsumerGroups()
	must(err, "ListConsumerGroups")
	check(groups[group] == "consumer", "ListConsumerGroups: %v", groups)
	desc, err := admin.DescribeConsumerGroups([]string{group})
	must(err, "DescribeConsumerGroups")
	check(len(desc) == 1 && desc[0].GroupId == group && desc[0].State == "Empty",
		"DescribeConsumerGroups: %+v", desc)
	step("admin: group listed and described (%s)", desc[0].State)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "idempotent" {
		idempotentMain(os.Args[2:]) // idempotent.go
		return
	}
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: sarama_client BOOTSTRAP KAFKA_VERSION")
		os.Exit(2)
	}
	addrs := []string{os.Args[1]}
	version, err := sarama.ParseKafkaVersion(os.Args[2])
	must(err, "version")
	adminStage(addrs, version)
	want := produceStage(addrs, version)
	consumeStage(addrs, version, want)
	groupStage(addrs, version)
	offsetsForTimesStage(addrs, version, want)
	fmt.Println("ok")
}
