// kafkajs over a secured listener: create a topic, produce 60 keyed
// messages, read them back as a consumer group member, and commit.
// Usage: node secure.js HOST:PORT TOPIC CA_FILE|- MECHANISM|- USER PASSWORD [expect-fail]
//   CA_FILE '-': no TLS; MECHANISM '-': no SASL ('plain', 'scram-sha-256',
//   'scram-sha-512' as kafkajs names them).  With expect-fail the connection
//   must be refused (a wrong password, an untrusted certificate) and the
//   script prints REFUSED <error name>.
'use strict'
const assert = require('assert')
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic, ca, mechanism, username, password, expect] = process.argv.slice(2)
const conf = {
  clientId: 'strata-js-secure',
  brokers: [bootstrap],
  logLevel: logLevel.NOTHING,
  retry: { retries: expect === 'expect-fail' ? 0 : 3 },
  connectionTimeout: 5000,
}
if (ca !== '-') conf.ssl = { ca: [fs.readFileSync(ca, 'utf8')], servername: 'localhost' }
if (mechanism !== '-') conf.sasl = { mechanism, username, password }
const kafka = new Kafka(conf)

async function main() {
  const admin = kafka.admin()
  if (expect === 'expect-fail') {
    try {
      await admin.connect()
      await admin.listTopics()
    } catch (e) {
      console.log('REFUSED ' + e.name + ': ' + e.message)
      await admin.disconnect().catch(() => {})
      return
    }
    throw new Error('the connection was accepted')
  }
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true })
  const producer = kafka.producer()
  await producer.connect()
  const sent = []
  for (let i = 0; i < 60; i++) sent.push({ key: 'k' + (i % 7), value: 'v' + i })
  await producer.send({ topic, messages: sent.slice(0, 30) })
  await producer.send({ topic, messages: sent.slice(30) })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: topic + '-group', sessionTimeout: 10000 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const got = []
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out: ' + got.length + ' of 60')), 60000)
    consumer.run({
      eachMessage: async ({ message }) => {
        got.push(message.value.toString())
        if (got.length === 60) {
          clearTimeout(timer)
          resolve()
        }
      },
    })
  })
  await consumer.disconnect()
  assert.deepStrictEqual(got.slice().sort(), sent.map(m => m.value).sort())
  const offsets = await admin.fetchOffsets({ groupId: topic + '-group', topics: [topic] })
  const committed = offsets[0].partitions.reduce((n, p) => n + Number(p.offset), 0)
  assert.strictEqual(committed, 60, 'committed offsets sum to ' + committed)
  await admin.disconnect()
  console.log('OK 60 messages, group committed ' + committed)
}

main().catch(e => {
  console.error('FAILED ' + e.stack)
  process.exit(1)
})
