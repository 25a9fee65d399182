// Driven by server/e2e_sasl_test.go: logs in with SASL (SCRAM over the SSL
// listener), produces COUNT records to an existing topic and reads them back
// with kafkajs' own fetch path. Prints one JSON line with the counts; exits
// non-zero on any failure, including a refused login (the test uses that to
// check that a wrong password is refused).
//
// usage: node sasl.js BROKER TOPIC COUNT
// env: RUNNEL_KAFKAJS_CA (PEM file trusted for SSL), RUNNEL_KAFKAJS_CERT and
// RUNNEL_KAFKAJS_KEY (client certificate and key, PEM), RUNNEL_KAFKAJS_SASL
// (scram-sha-256 or scram-sha-512), RUNNEL_KAFKAJS_USER, RUNNEL_KAFKAJS_PASSWORD.
'use strict'

const fs = require('fs')

const { Kafka, logLevel } = require('kafkajs')

const [broker, topic, countArg] = process.argv.slice(2)
const count = Number(countArg)
const run = String(process.pid) // tells this run's records from earlier ones in the topic

function fail(msg) {
  console.error('kafkajs sasl: ' + msg)
  process.exit(1)
}

function createCluster(kafka) {
  const sym = Object.getOwnPropertySymbols(kafka).find(s => s.description === 'private:Kafka:createCluster')
  if (!sym) fail('kafkajs internals changed: no createCluster')
  return kafka[sym]({ allowAutoTopicCreation: false })
}

async function readFrom(kafka, start) {
  const cluster = createCluster(kafka)
  await cluster.connect()
  await cluster.addTargetTopic(topic)
  let read = 0
  for (const pm of cluster.findTopicPartitionMetadata(topic)) {
    const leader = await cluster.findBroker({ nodeId: String(pm.leader) })
    let offset = start.get(pm.partitionId) || 0
    for (;;) {
      const resp = await leader.fetch({
        replicaId: -1, isolationLevel: 1, maxWaitTime: 100, minBytes: 1, maxBytes: 1 << 20,
        topics: [{ topic, partitions: [{ partition: pm.partitionId, fetchOffset: String(offset), maxBytes: 1 << 20 }] }],
      })
      const p = resp.responses[0].partitions[0]
      if (p.errorCode !== 0) fail(`partition ${pm.partitionId}: error ${p.errorCode}`)
      for (const m of p.messages) {
        if (Number(m.offset) < offset) continue
        offset = Number(m.offset) + 1
        if (m.headers.run && m.headers.run.toString() === run) {
          const idx = Number(m.headers.idx.toString())
          if (m.value.toString() !== `value-${idx}`) fail(`record ${idx}: value ${m.value}`)
          read++
        }
      }
      if (offset >= Number(p.highWatermark)) break
    }
  }
  await cluster.disconnect()
  return read
}

async function main() {
  // The SSL listener wants a client certificate; SASL then names the user.
  const ssl = {
    ca: [fs.readFileSync(process.env.RUNNEL_KAFKAJS_CA, 'utf8')],
    cert: fs.readFileSync(process.env.RUNNEL_KAFKAJS_CERT, 'utf8'),
    key: fs.readFileSync(process.env.RUNNEL_KAFKAJS_KEY, 'utf8'),
  }
  const sasl = {
    mechanism: process.env.RUNNEL_KAFKAJS_SASL,
    username: process.env.RUNNEL_KAFKAJS_USER,
    password: process.env.RUNNEL_KAFKAJS_PASSWORD,
  }
  // No retries: a refused login must fail fast, not be retried for a minute.
  const kafka = new Kafka({ clientId: 'runnel-e2e-kafkajs-sasl', brokers: [broker], ssl, sasl, logLevel: logLevel.NOTHING, retry: { retries: 0 } })
  const admin = kafka.admin()
  await admin.connect()
  const before = await admin.fetchTopicOffsets(topic)
  const start = new Map(before.map(o => [o.partition, Number(o.high)]))
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const messages = []
  for (let i = 0; i < count; i++) messages.push({ key: `k-${i}`, value: `value-${i}`, headers: { run, idx: String(i) } })
  await producer.send({ topic, messages, acks: -1 })
  await producer.disconnect()
  await admin.disconnect()
  const read = await readFrom(kafka, start)
  if (read !== count) fail(`read ${read} records, produced ${count}`)
  console.log(JSON.stringify({ produced: count, read }))
}

main().catch(err => fail(`${err.name}: ${err.message}`))
