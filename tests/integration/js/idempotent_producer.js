// The kafkajs writer of test_idempotent_clients.py: an idempotent producer
// (idempotent: true, maxInFlightRequests 1 as kafkajs requires, acks -1)
// that numbers its messages per partition as clients/rdk_idem_producer.c
// does: message i goes to partition p = i % PARTITIONS with sequence
// q = i / PARTITIONS, value "TAG p q ...".  Every acknowledged message is
// appended to ACKFILE as "p offset q"; a send kafkajs gave up on is sent
// again, unchanged, by this program (kafkajs keeps a partition's sequence
// until a send succeeds, so the broker must take the resend as the same
// batch).  A non-retriable error ends the run: "FATAL name: message",
// exit status 3.
//
// Usage: node idempotent_producer.js BOOTSTRAP TOPIC PARTITIONS TAG ACKFILE [COUNT]
// Runs until COUNT messages are acknowledged (0 or none: until SIGTERM),
// then prints "produced N acked A failed 0 unacked U errors E".
'use strict'
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic, partsArg, tag, ackfile, countArg] = process.argv.slice(2)
const parts = Number(partsArg)
const count = Number(countArg || 0)
const PER_SEND = 3 // messages per partition per send

let stop = false
process.on('SIGTERM', () => { stop = true })
process.on('SIGINT', () => { stop = true })

const kafka = new Kafka({
  clientId: 'strata-js-idem', brokers: [bootstrap], logLevel: logLevel.NOTHING,
  connectionTimeout: 3000, requestTimeout: 10000,
  retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 1000 },
})

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function main() {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1,
    retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 1000 } })
  let errors = 0
  let fatal = null
  for (let tries = 0; ; tries++) {
    try { await producer.connect(); break } catch (e) {
      errors++
      if (tries > 50) throw e
      await sleep(200)
    }
  }
  let i = 0
  let acked = 0
  const fd = fs.openSync(ackfile, 'a')
  while (!stop && (count === 0 || i < count)) {
    const messages = []
    const seqs = []
    for (let k = 0; k < PER_SEND * parts; k++, i++) {
      const p = i % parts
      const q = Math.floor(i / parts)
      messages.push({ partition: p, value: `${tag} ${p} ${q} ` + '.'.repeat(60) })
      seqs.push([p, q])
    }
    let res = null
    for (let tries = 0; res === null; tries++) {
      try {
        res = await producer.send({ topic, acks: -1, messages })
      } catch (e) {
        errors++
        // the errors an idempotent producer cannot retry its way out of
        const cause = e.originalError || e.cause || e
        if (/SEQUENCE|PRODUCER|EPOCH|INVALID_RECORD|CORRUPT/.test(`${e.type} ${cause.type}`)) {
          fatal = cause
          break
        }
        if (tries > 200) { fatal = e; break }
        await sleep(100)
      }
    }
    if (fatal) break
    // one entry per partition: its base offset; that partition's messages
    // of this send follow each other from it
    const base = {}
    for (const r of res) base[r.partition] = BigInt(r.baseOffset)
    const next = {}
    let lines = ''
    for (const [p, q] of seqs) {
      const off = base[p] + BigInt(next[p] || 0)
      next[p] = (next[p] || 0) + 1
      lines += `${p} ${off} ${q}\n`
      acked++
    }
    fs.writeSync(fd, lines)
  }
  fs.closeSync(fd)
  if (fatal) console.log(`FATAL ${fatal.type || fatal.name}: ${fatal.message}`)
  console.log(`produced ${i} acked ${acked} failed 0 unacked ${i - acked} errors ${errors}`)
  await producer.disconnect().catch(() => {})
  process.exit(fatal ? 3 : 0)
}

main().catch(e => { console.log(`FATAL ${e.type || e.name}: ${e.message}`); process.exit(3) })
