// One member of a kafkajs consumer group for the group tests: commits each
// record's offset + 1 after processing it (autoCommit off).  Prints the
// lines tests/integration/group_members.py reads:
//   ASSIGN <ms> <p,p,...|-> <member id>, REVOKE <ms>,
//   MSG <partition> <offset> <value>, CLOSED
// SIGTERM: disconnect (LeaveGroup), print CLOSED, exit 0.
// Usage: node group_member.js HOST:PORT GROUP TOPIC DELAY_MS SESSION_MS
//        node group_member.js HOST:PORT - TOPIC produce COUNT PARTITIONS
'use strict'
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, group, topic, a4, a5, a6] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'strata-js-group', brokers: bootstrap.split(','), logLevel: process.env.STRATA_JS_LOG ? logLevel.WARN : logLevel.NOTHING,
                          retry: { retries: 10, initialRetryTime: 100 } })
const out = line => process.stdout.write(line + '\n')
const sleep = ms => new Promise(r => setTimeout(r, ms))

async function produce(count, partitions) {
  const p = kafka.producer()
  await p.connect()
  for (let base = 0; base < count; base += 500) {
    const messages = []
    for (let i = base; i < Math.min(count, base + 500); i++)
      messages.push({ partition: i % partitions, value: 'v' + i })
    await p.send({ topic, acks: -1, messages })
  }
  await p.disconnect()
  out('PRODUCED ' + count)
}

async function member(delayMs, sessionMs) {
  // few retries, so that a commit to a coordinator that moved fails soon
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: sessionMs, heartbeatInterval: 500,
                                    rebalanceTimeout: 10000,
                                    retry: { retries: 3, initialRetryTime: 100, maxRetryTime: 1000 } })
  consumer.on(consumer.events.GROUP_JOIN, e => {
    const parts = (e.payload.memberAssignment[topic] || []).slice().sort((x, y) => x - y)
    out(`ASSIGN ${Date.now()} ${parts.length ? parts.join(',') : '-'} ${e.payload.memberId}`)
  })
  consumer.on(consumer.events.REBALANCING, () => out(`REVOKE ${Date.now()}`))
  // A clean stop finishes the record in hand (its commit included) before
  // leaving, and takes no new one.
  let stopping = false
  let inflight = Promise.resolve()
  process.on('SIGTERM', async () => {
    if (stopping) return
    stopping = true
    await inflight
    await consumer.disconnect()
    out('CLOSED')
    process.exit(0)
  })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      if (stopping) return // not processed, not committed: the next owner gets it
      let done
      inflight = new Promise(r => { done = r })
      try {
        out(`MSG ${partition} ${message.offset} ${message.value.toString()}`)
        if (delayMs) await sleep(delayMs)
        try {
          await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }])
        } catch (e) {
          // kafkajs 2.2.4 sends a commit made in eachMessage to the
          // coordinator it joined with, by node id, for its every retry
          // (OffsetManager keeps it), so a coordinator that moved answers
          // NOT_COORDINATOR until the retries run out; and it stops the
          // consumer for good on ILLEGAL_GENERATION (kafkajs issue 1712).
          // Both happen with Kafka as with Strata.  As its users do, the
          // member gives the error back as the rebalance it is, and kafkajs
          // finds the coordinator and joins again: the commit is lost, and
          // the record comes again to its next owner.
          const cause = e.type ? e : e.cause || e
          if (!['ILLEGAL_GENERATION', 'REBALANCE_IN_PROGRESS', 'NOT_COORDINATOR_FOR_GROUP'].includes(cause.type)) throw e
          out(`COMMITFAIL ${partition} ${message.offset} ${cause.type}`)
          throw cause
        }
      } finally {
        done()
      }
    },
  })
}

const run = group === '-' ? produce(Number(a5), Number(a6)) : member(Number(a4), Number(a5))
run.catch(e => { console.error(e); process.exit(1) })
