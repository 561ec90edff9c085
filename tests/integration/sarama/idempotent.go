// The Sarama writer of test_idempotent_clients.py: an idempotent
// AsyncProducer (Producer.Idempotent, Net.MaxOpenRequests 1, RequiredAcks
// WaitForAll, as Sarama requires) that numbers its messages per partition
// as clients/rdk_idem_producer.c does: message i goes to partition
// p = i % PARTITIONS with sequence q = i / PARTITIONS, value "TAG p q ...".
// Each success is appended to ACKFILE as "p offset q", each failure as
// "F p q error".  An error the idempotent producer cannot retry (a
// sequence or producer id error) is printed "FATAL name: text" and the
// exit status is 3.  Each request carries one message (see
// Flush.MaxMessages below).
//
// Usage: sarama_client idempotent BOOTSTRAP TOPIC PARTITIONS TAG ACKFILE [RATE]
// Runs until SIGTERM, then flushes and prints
// "produced N acked A failed F unacked 0 errors E".
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/Shopify/sarama"
)

type seqTag struct{ p, q int64 }

func idempotentMain(args []string) {
	if len(args) < 5 {
		fmt.Fprintln(os.Stderr, "usage: sarama_client idempotent BOOTSTRAP TOPIC PARTITIONS TAG ACKFILE [RATE]")
		os.Exit(2)
	}
	bootstrap, topic, tag, ackfile := args[0], args[1], args[3], args[4]
	parts, err := strconv.Atoi(args[2])
	must(err, "PARTITIONS")
	rate := 500
	if len(args) > 5 {
		rate, err = strconv.Atoi(args[5])
		must(err, "RATE")
	}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_1_0_0
	cfg.ClientID = "sarama-idem"
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Net.DialTimeout = 3 * time.Second
	cfg.Net.ReadTimeout = 10 * time.Second
	cfg.Producer.Retry.Max = 1000
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	// One message per request: Sarama 1.22 builds a retried message's
	// batch anew, so a message whose answer was lost can go out again
	// merged with newer ones, a batch of other bounds than the one the
	// broker wrote: not a duplicate but a sequence overlap, which Kafka
	// and Strata answer OUT_OF_ORDER_SEQUENCE_NUMBER.  Batches of one
	// message keep their bounds on a retry.
	cfg.Producer.Flush.MaxMessages = 1
	cfg.Metadata.Retry.Max = 1000
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	var prod sarama.AsyncProducer
	for tries := 0; ; tries++ {
		prod, err = sarama.NewAsyncProducer([]string{bootstrap}, cfg)
		if err == nil || tries > 50 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	must(err, "NewAsyncProducer")
	f, err := os.OpenFile(ackfile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0644)
	must(err, "open "+ackfile)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	var acked, failed int64
	fatal := ""
	go func() {
		defer close(done)
		succ, errs := prod.Successes(), prod.Errors()
		for succ != nil || errs != nil {
			select {
			case m, ok := <-succ:
				if !ok {
					succ = nil
					continue
				}
				t := m.Metadata.(seqTag)
				fmt.Fprintf(f, "%d %d %d\n", t.p, m.Offset, t.q)
				acked++
			case e, ok := <-errs:
				if !ok {
					errs = nil
					continue
				}
				t := e.Msg.Metadata.(seqTag)
				name := strings.ReplaceAll(e.Err.Error(), " ", "_")
				fmt.Fprintf(f, "F %d %d %s\n", t.p, t.q, name)
				failed++
				if fatal == "" && (e.Err == sarama.ErrOutOfOrderSequenceNumber ||
					e.Err == sarama.ErrInvalidProducerEpoch || e.Err == sarama.ErrUnknownProducerID ||
					e.Err == sarama.ErrDuplicateSequenceNumber) {
					fatal = fmt.Sprintf("FATAL %d: %v", e.Err, e.Err)
				}
			}
		}
	}()
	var i int64
	tick := time.NewTicker(time.Second / time.Duration(rate))
loop:
	for {
		select {
		case <-stop:
			break loop
		case <-tick.C:
			p, q := i%int64(parts), i/int64(parts)
			v := fmt.Sprintf("%s %d %d %s", tag, p, q, strings.Repeat(".", 60))
			prod.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: int32(p),
				Value: sarama.StringEncoder(v), Metadata: seqTag{p, q}}
			i++
		}
	}
	tick.Stop()
	prod.AsyncClose()
	<-done
	f.Close()
	if fatal != "" {
		fmt.Println(fatal)
	}
	fmt.Printf("produced %d acked %d failed %d unacked %d errors %d\n", i, acked, failed, i-acked-failed, failed)
	if fatal != "" {
		os.Exit(3)
	}
}
