// kafkajs's transactional producer and read_committed consumer, for
// test_txn_kafkajs.py.
//
//   node txn_producer.js produce BOOTSTRAP TOPIC TXN_ID TXNS MSGS ABORT_EVERY
//       TXNS transactions of MSGS messages, message j of transaction k to
//       partition j % 3 with value "k j"; transaction k is aborted when
//       ABORT_EVERY > 0 and k % ABORT_EVERY == ABORT_EVERY - 1 (after its
//       sends were acknowledged, so aborted data is in the log), else
//       committed.  Prints "COMMITTED k" / "ABORTED k"; "FATAL name:
//       message" and exit 3 on an error.
//   node txn_producer.js consume BOOTSTRAP TOPIC IDLE_MS
//       a read_committed consumer (kafkajs's default) of every partition
//       from the start, until IDLE_MS pass without a message; prints
//       "p offset value".
//   node txn_producer.js zombie BOOTSTRAP TOPIC TXN_ID
//       two producers with one transactional id: the first sends in a
//       transaction, the second (its InitProducerId fences the first)
//       commits one of its own: "SECOND COMMITTED"; then the first's
//       commit must fail: "FENCED name".
'use strict'
const { Kafka, logLevel } = require('kafkajs')

const [mode, bootstrap, topic, ...rest] = process.argv.slice(2)
const kafka = new Kafka({
  clientId: 'strata-js-txn', brokers: [bootstrap], logLevel: logLevel.NOTHING,
  connectionTimeout: 3000, requestTimeout: 10000,
  retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 1000 },
})

function producerFor(id) {
  return kafka.producer({ transactionalId: id, idempotent: true, maxInFlightRequests: 1,
    transactionTimeout: 30000, retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 1000 } })
}

async function produce(id, txns, msgs, abortEvery) {
  const producer = producerFor(id)
  await producer.connect()
  for (let k = 0; k < txns; k++) {
    const txn = await producer.transaction()
    const byPart = [[], [], []]
    for (let j = 0; j < msgs; j++) byPart[j % 3].push({ value: `${k} ${j}`, partition: j % 3 })
    for (const m of byPart) if (m.length) await txn.send({ topic, acks: -1, messages: m })
    if (abortEvery > 0 && k % abortEvery === abortEvery - 1) {
      await txn.abort()
      console.log(`ABORTED ${k}`)
    } else {
      await txn.commit()
      console.log(`COMMITTED ${k}`)
    }
  }
  await producer.disconnect()
}

async function consume(idleMs) {
  const consumer = kafka.consumer({ groupId: `strata-js-txn-${process.pid}`, readUncommitted: false,
    maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  let last = Date.now()
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      last = Date.now()
      console.log(`${partition} ${message.offset} ${message.value.toString()}`)
    },
  })
  while (Date.now() - last < idleMs) await new Promise(resolve => setTimeout(resolve, 100))
  await consumer.disconnect()
}

async function zombie(id) {
  const first = producerFor(id)
  await first.connect()
  const t1 = await first.transaction()
  await t1.send({ topic, acks: -1, messages: [{ value: 'zombie', partition: 0 }] })
  // the second producer's InitProducerId fences the first (its open
  // transaction is aborted); its own transaction then commits
  const second = producerFor(id)
  await second.connect()
  const t2 = await second.transaction()
  await t2.send({ topic, acks: -1, messages: [{ value: 'second', partition: 0 }] })
  await t2.commit()
  console.log('SECOND COMMITTED')
  try {
    await t1.commit()
    console.log('NOT FENCED')
    process.exitCode = 1
  } catch (e) {
    console.log(`FENCED ${e.type || e.name}`)
  }
  await second.disconnect()
  await first.disconnect().catch(() => {})
}

async function main() {
  if (mode === 'produce') await produce(rest[0], Number(rest[1]), Number(rest[2]), Number(rest[3]))
  else if (mode === 'consume') await consume(Number(rest[0]))
  else if (mode === 'zombie') await zombie(rest[0])
  else throw new Error(`unknown mode ${mode}`)
}

main().catch(e => {
  console.log(`FATAL ${e.type || e.name}: ${e.message}`)
  process.exit(3)
})
