// kafkajs against a real stratad: admin operations, produce with keys,
// headers, null values, explicit timestamps and gzip, then read every
// partition back with Fetch requests sent by kafkajs's own broker client
// (partition assignment by hand: consumer groups are not part of this).
// Usage: node roundtrip.js HOST:PORT
'use strict'
const assert = require('assert')
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const bootstrap = process.argv[2]
const kafka = new Kafka({ clientId: 'strata-js-test', brokers: [bootstrap], logLevel: logLevel.WARN, retry: { retries: 3 } })

function clusterOf(k) {
  // kafkajs keeps its cluster factory behind a symbol; the Fetch path below
  // is kafkajs's own encoder and decoder.
  const sym = Object.getOwnPropertySymbols(k).find(s => s.description === 'private:Kafka:createCluster')
  return k[sym]({})
}

async function readAll(topic, partitions) {
  const cluster = clusterOf(kafka)
  await cluster.connect()
  await cluster.addTargetTopic(topic)
  const out = {}
  for (const p of partitions) {
    out[p] = []
    const leaders = cluster.findLeaderForPartitions(topic, [p])
    const broker = await cluster.findBroker({ nodeId: Object.keys(leaders)[0] })
    let offset = 0
    for (;;) {
      const res = await broker.fetch({
        replicaId: -1, isolationLevel: 1, maxWaitTime: 100, minBytes: 1, maxBytes: 1 << 20,
        topics: [{ topic, partitions: [{ partition: p, fetchOffset: String(offset), maxBytes: 256 * 1024 }] }],
      })
      const part = res.responses[0].partitions[0]
      assert.strictEqual(part.errorCode, 0, `fetch error ${part.errorCode}`)
      const msgs = part.messages.filter(m => BigInt(m.offset) >= BigInt(offset))
      for (const m of msgs) out[p].push(m)
      if (msgs.length) offset = Number(msgs[msgs.length - 1].offset) + 1
      if (offset >= Number(part.highWatermark)) break
    }
  }
  await cluster.disconnect()
  return out
}

async function main() {
  const admin = kafka.admin()
  await admin.connect()
  const topic = 'js-roundtrip'
  assert.strictEqual(await admin.createTopics({ topics: [{ topic, numPartitions: 3 }] }), true)
  let md = await admin.fetchTopicMetadata({ topics: [topic] })
  assert.strictEqual(md.topics[0].partitions.length, 3)
  const cluster = await admin.describeCluster()
  assert.strictEqual(cluster.brokers.length, 1)
  assert.strictEqual(cluster.controller, cluster.brokers[0].nodeId)

  // configs: set, then read back
  await admin.alterConfigs({ resources: [{ type: 2, name: topic, configEntries: [{ name: 'retention.ms', value: '86400000' }] }] })
  const cfg = await admin.describeConfigs({ resources: [{ type: 2, name: topic }], includeSynonyms: false })
  const ret = cfg.resources[0].configEntries.find(e => e.configName === 'retention.ms')
  assert.strictEqual(ret.configValue, '86400000')

  const producer = kafka.producer()
  await producer.connect()
  const base = Date.now() - 3600 * 1000
  const sent = []
  for (let batch = 0; batch < 20; batch++) {
    const messages = []
    for (let i = 0; i < 150; i++) {
      const n = batch * 150 + i
      const m = {
        key: `k${n}`,
        value: n % 50 === 7 ? null : `value ${n} ` + 'x'.repeat(n % 97),
        headers: { seq: String(n), kind: n % 2 ? 'odd' : 'even' },
        timestamp: String(base + n),
        partition: n % 3,
      }
      messages.push(m)
      sent.push(m)
    }
    await producer.send({
      topic, messages,
      acks: batch % 2 ? -1 : 1,
      compression: batch % 4 === 3 ? CompressionTypes.GZIP : CompressionTypes.None,
    })
  }
  await producer.disconnect()

  const got = await readAll(topic, [0, 1, 2])
  for (const p of [0, 1, 2]) {
    const want = sent.filter(m => m.partition === p)
    assert.strictEqual(got[p].length, want.length, `partition ${p}: ${got[p].length} of ${want.length}`)
    got[p].forEach((m, i) => {
      const w = want[i]
      assert.strictEqual(Number(m.offset), i, `partition ${p} offset ${m.offset} at ${i}`)
      assert.strictEqual(m.key.toString(), w.key)
      if (w.value === null) assert.strictEqual(m.value, null)
      else assert.strictEqual(m.value.toString(), w.value)
      assert.strictEqual(m.headers.seq.toString(), w.headers.seq)
      assert.strictEqual(m.headers.kind.toString(), w.headers.kind)
      assert.strictEqual(m.timestamp, w.timestamp)
    })
  }

  // ListOffsets: earliest / latest and by timestamp
  const offs = await admin.fetchTopicOffsets(topic)
  for (const o of offs) assert.strictEqual(Number(o.high), 1000, `high ${o.high}`)
  const byTs = await admin.fetchTopicOffsetsByTimestamp(topic, base + 1500)
  for (const o of byTs) {
    // the first record of each partition with timestamp >= base+1500
    const first = sent.filter(m => m.partition === o.partition).findIndex(m => Number(m.timestamp) >= base + 1500)
    assert.strictEqual(Number(o.offset), first, `partition ${o.partition} offset by time ${o.offset} != ${first}`)
  }

  // DeleteRecords moves the low watermark
  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '100' }] })
  const after = await admin.fetchTopicOffsets(topic)
  assert.strictEqual(Number(after.find(o => o.partition === 0).low), 100)

  // CreatePartitions, DeleteTopics
  await admin.createPartitions({ topicPartitions: [{ topic, count: 5 }] })
  md = await admin.fetchTopicMetadata({ topics: [topic] })
  assert.strictEqual(md.topics[0].partitions.length, 5)
  await admin.deleteTopics({ topics: [topic] })
  const names = await admin.listTopics()
  assert.ok(!names.includes(topic), 'topic still listed after delete')
  await admin.disconnect()
  console.log(`ok: ${sent.length} messages through kafkajs, admin round trips passed`)
}

main().catch(e => { console.error('FAIL:', e); process.exit(1) })
