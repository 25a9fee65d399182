// Consumer group wire shapes, read defensively: the groups endpoints arrive
// with their own issue, and field names are normalised here in one place.

export function groupName(g) {
  return g.group_id ?? g.group ?? g.name ?? '';
}

// offsetsOf flattens a group description's committed offsets to
// [{topic, partition, committed, end, lag, lagMs}].
export function offsetsOf(d) {
  const rows = [];
  const push = (topic, o) => {
    const committed = o.committed_offset ?? o.offset ?? o.committed ?? -1;
    const end = o.end_offset ?? o.high_watermark ?? o.log_end_offset;
    const lag = o.lag ?? (end !== undefined && committed >= 0 ? Math.max(0, end - committed) : undefined);
    rows.push({ topic: o.topic ?? topic, partition: o.partition, committed, end, lag, lagMs: o.lag_ms ?? o.time_lag_ms, member: o.member_id ?? o.consumer_id });
  };
  const src = d.offsets ?? d.partitions ?? [];
  for (const o of src) {
    if (Array.isArray(o.partitions)) for (const p of o.partitions) push(o.topic, p);
    else push(o.topic, o);
  }
  rows.sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition));
  return rows;
}

// assignmentOf renders a member's assignment as "topic: 0, 1, 2; other: 3".
export function assignmentOf(m) {
  const a = m.assignment ?? m.assignments ?? [];
  const list = Array.isArray(a) ? a : Object.entries(a).map(([topic, partitions]) => ({ topic, partitions }));
  return list.map(x => `${x.topic}: ${(x.partitions || []).join(', ')}`).join('; ');
}

export function totalLag(d) {
  if (d.lag !== undefined) return d.lag;
  if (d.total_lag !== undefined) return d.total_lag;
  return offsetsOf(d).reduce((s, o) => s + (o.lag || 0), 0);
}

// plannedRows turns the server's planned offsets (GroupResetResult) into
// preview rows, with the lag after the reset from the topics' high watermarks.
export function plannedRows(planned, topicInfo) {
  return planned.map((o) => {
    const t = topicInfo.get(o.topic);
    const p = t && (t.partitions || []).find(x => x.partition === o.partition);
    const end = p ? (p.high_watermark ?? p.end_offset) : undefined;
    return { topic: o.topic, partition: o.partition, committed: o.current_offset, target: o.new_offset, clamped: false,
      newLag: end === undefined ? undefined : Math.max(0, end - o.new_offset) };
  });
}

// planReset computes the offsets a reset would commit. strategy: earliest,
// latest, offset (value), shift (value, may be negative), timestamp (resolved
// beforehand into byTime: Map "topic/partition" -> offset). topicInfo maps a
// topic name to its description (start_offset, high_watermark per partition).
export function planReset(rows, strategy, value, topicInfo, byTime) {
  return rows.map((o) => {
    const t = topicInfo.get(o.topic);
    const p = t && (t.partitions || []).find(x => x.partition === o.partition);
    const start = p ? p.start_offset : 0;
    const end = p ? (p.high_watermark ?? p.end_offset) : o.end;
    let target;
    if (strategy === 'earliest') target = start;
    else if (strategy === 'latest') target = end;
    else if (strategy === 'offset') target = Number(value);
    else if (strategy === 'shift') target = (o.committed < 0 ? start : o.committed) + Number(value);
    else target = byTime.get(o.topic + '/' + o.partition) ?? end;
    const clamped = Math.min(Math.max(target, start), end);
    return { ...o, target: clamped, clamped: clamped !== target, newLag: Math.max(0, end - clamped) };
  });
}
