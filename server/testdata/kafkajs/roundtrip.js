// Driven by server/e2e_kafka_test.go: creates a topic with kafkajs' admin
// client, produces records with keys and headers (idempotent, half of the
// batches gzip-compressed), reads every partition back with kafkajs' own
// fetch path and checks content and per-partition order. Prints one JSON
// line with the counts; exits non-zero on any mismatch.
//
// usage: node roundtrip.js BROKER TOPIC COUNT
// With RUNNEL_KAFKAJS_CA set (a PEM file), it connects over SSL trusting it.
'use strict'

const fs = require('fs')

const { Kafka, CompressionTypes, Partitioners, logLevel } = require('kafkajs')

const [broker, topic, countArg] = process.argv.slice(2)
const count = Number(countArg)
const partitions = 3

function fail(msg) {
  console.error('kafkajs roundtrip: ' + msg)
  process.exit(1)
}

// kafkajs' consumer needs consumer groups; its cluster object (what the
// consumer uses underneath) reads partitions directly.
function createCluster(kafka) {
  const sym = Object.getOwnPropertySymbols(kafka).find(s => s.description === 'private:Kafka:createCluster')
  if (!sym) fail('kafkajs internals changed: no createCluster')
  return kafka[sym]({ allowAutoTopicCreation: false })
}

async function produce(kafka) {
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
    createPartitioner: Partitioners.DefaultPartitioner,
  })
  await producer.connect()
  const batch = 500
  for (let start = 0; start < count; start += batch) {
    const messages = []
    for (let i = start; i < Math.min(start + batch, count); i++) {
      messages.push({
        key: `key-${i % 50}`,
        value: `value-${i}`,
        headers: { idx: String(i), client: 'kafkajs' },
      })
    }
    const compression = (start / batch) % 2 === 0 ? CompressionTypes.None : CompressionTypes.GZIP
    await producer.send({ topic, messages, acks: -1, compression })
  }
  await producer.disconnect()
}

async function readBack(kafka) {
  const cluster = createCluster(kafka)
  await cluster.connect()
  await cluster.addTargetTopic(topic)
  const meta = cluster.findTopicPartitionMetadata(topic)
  const seen = new Set()
  for (const pm of meta) {
    const leader = await cluster.findBroker({ nodeId: String(pm.leader) })
    let offset = 0
    let last = -1
    for (;;) {
      const resp = await leader.fetch({
        replicaId: -1,
        isolationLevel: 1,
        maxWaitTime: 100,
        minBytes: 1,
        maxBytes: 1 << 20,
        topics: [{ topic, partitions: [{ partition: pm.partitionId, fetchOffset: String(offset), maxBytes: 1 << 20 }] }],
      })
      const p = resp.responses[0].partitions[0]
      if (p.errorCode !== 0) fail(`partition ${pm.partitionId}: error ${p.errorCode}`)
      for (const m of p.messages) {
        const off = Number(m.offset)
        if (off < offset) continue // a batch starting before the fetch offset
        if (off !== offset) fail(`partition ${pm.partitionId}: offset ${off}, want ${offset}`)
        offset = off + 1
        const idx = Number(m.headers.idx.toString())
        if (idx <= last) fail(`partition ${pm.partitionId}: record ${idx} after ${last}`)
        last = idx
        if (m.key.toString() !== `key-${idx % 50}` || m.value.toString() !== `value-${idx}` ||
            m.headers.client.toString() !== 'kafkajs') {
          fail(`record ${idx}: key ${m.key} value ${m.value}`)
        }
        if (seen.has(idx)) fail(`record ${idx} read twice`)
        seen.add(idx)
      }
      if (offset >= Number(p.highWatermark)) break
    }
  }
  await cluster.disconnect()
  return seen.size
}

async function main() {
  const ca = process.env.RUNNEL_KAFKAJS_CA
  const ssl = ca ? { ca: [fs.readFileSync(ca, 'utf8')] } : undefined
  const kafka = new Kafka({ clientId: 'runnel-e2e-kafkajs', brokers: [broker], ssl, logLevel: logLevel.WARN })
  const admin = kafka.admin()
  await admin.connect()
  const created = await admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }], waitForLeaders: true })
  if (!created) fail('topic not created')
  await produce(kafka)
  const offsets = await admin.fetchTopicOffsets(topic)
  const total = offsets.reduce((n, o) => n + Number(o.high) - Number(o.low), 0)
  if (total !== count) fail(`ListOffsets says ${total} records, produced ${count}`)
  await admin.disconnect()
  const read = await readBack(kafka)
  if (read !== count) fail(`read ${read} records, produced ${count}`)
  console.log(JSON.stringify({ produced: count, read, partitions: offsets.length }))
}

main().catch(err => fail(err.stack || String(err)))
