// Driven by server/e2e_groups_test.go: MEMBERS kafkajs consumers join one
// consumer group on TOPIC (from the beginning, auto-committing) and read
// until COUNT distinct record values have been seen between them. Prints one
// JSON line: how many records each member read and the distinct total;
// exits non-zero on a timeout.
//
// usage: node groups.js BROKER TOPIC GROUP COUNT MEMBERS
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const [broker, topic, groupId, countArg, membersArg] = process.argv.slice(2)
const count = Number(countArg)
const members = Number(membersArg)

async function main() {
  const kafka = new Kafka({ clientId: 'kafkajs-groups', brokers: [broker], logLevel: logLevel.NOTHING })
  const seen = new Set()
  const perMember = []
  const consumers = []
  let resolveDone
  const done = new Promise(resolve => { resolveDone = resolve })
  for (let i = 0; i < members; i++) {
    const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 200 })
    perMember.push(0)
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      autoCommitInterval: 200,
      eachMessage: async ({ message }) => {
        perMember[i]++
        seen.add(message.value.toString())
        if (seen.size >= count) resolveDone()
      },
    })
    consumers.push(consumer)
  }
  const timer = setTimeout(() => {
    console.error(`kafkajs groups: timed out with ${seen.size} of ${count} records`)
    process.exit(1)
  }, 90000)
  await done
  clearTimeout(timer)
  // Let the last auto-commit land, then leave the group.
  await new Promise(resolve => setTimeout(resolve, 500))
  for (const c of consumers) await c.disconnect()
  console.log(JSON.stringify({ distinct: seen.size, perMember }))
}

main().catch(err => {
  console.error('kafkajs groups: ' + (err && err.stack ? err.stack : err))
  process.exit(1)
})
