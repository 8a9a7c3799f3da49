//! Chrome trace-event JSON ("JSON Object Format"): what Perfetto and
//! `chrome://tracing` open. Times are microseconds from the trace's start.
//!
//! Each thread is a `tid` of one process: its spans are complete events
//! (`"ph":"X"`, named `running`, `waiting`, `syscall`), its marks instant
//! events (`"ph":"i"`). Two more kinds of event:
//!
//! * Flow arrows (`"ph":"s"` / `"ph":"f"`, `"name":"drop_request"`) from
//!   each drop request to the forced switch it caused: from the holder's row
//!   at the request to the new holder's row at its acquisition (or, if that
//!   is unknown, to the old holder's row at the switch). Perfetto binds a
//!   flow's ends to the slices around them, so both ends sit inside a span.
//!   A request the holder answered otherwise (a voluntary release), or that
//!   the trace ended before it was answered, has no arrow.
//! * A counter track, `waiting threads` (`"ph":"C"`, `args.waiting`): how
//!   many threads wait for the lock, sampled where that changes.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use super::{Row, ThreadState, Timeline, Trace};
use crate::events::EventKind;
use crate::Token;

/// The process id every event carries: one lock, one "process".
const PID: u32 = 1;

pub(super) fn write(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    let us = |ns: u64| (ns.saturating_sub(trace.start_ns)) as f64 / 1e3;
    let title = trace.title.as_deref().unwrap_or("gil");
    writeln!(out, "{{\"displayTimeUnit\":\"ms\",\"otherData\":{{")?;
    writeln!(
        out,
        "\"title\":{},\"duration_us\":{:.3},\"events\":{},\"dropped_events\":{},\"ring\":{}",
        json_string(title),
        us(trace.end_ns),
        trace.events.len(),
        trace.dropped,
        trace.ring
    )?;
    writeln!(out, "}},\"traceEvents\":[")?;
    write!(
        out,
        "{{\"ph\":\"M\",\"pid\":{PID},\"name\":\"process_name\",\"args\":{{\"name\":{}}}}}",
        json_string(title)
    )?;
    let timeline = trace.timeline();
    for (i, row) in timeline.rows.iter().enumerate() {
        let tid = i + 1;
        write!(
            out,
            ",\n{{\"ph\":\"M\",\"pid\":{PID},\"tid\":{tid},\"name\":\"thread_name\",\"args\":{{\"name\":{}}}}}",
            json_string(&row.name)
        )?;
        write!(
            out,
            ",\n{{\"ph\":\"M\",\"pid\":{PID},\"tid\":{tid},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{tid}}}}}"
        )?;
        for s in &row.spans {
            write!(
                out,
                ",\n{{\"ph\":\"X\",\"pid\":{PID},\"tid\":{tid},\"name\":\"{}\",\"cat\":\"gil\",\"ts\":{:.3},\"dur\":{:.3}}}",
                s.state.name(),
                us(s.start_ns),
                (s.end_ns - s.start_ns) as f64 / 1e3
            )?;
        }
        for m in &row.marks {
            write!(
                out,
                ",\n{{\"ph\":\"i\",\"s\":\"t\",\"pid\":{PID},\"tid\":{tid},\"name\":\"{}\",\"cat\":\"gil\",\"ts\":{:.3}}}",
                m.kind.name(),
                us(m.time_ns)
            )?;
        }
    }
    for (id, f) in drop_request_flows(trace, &timeline).iter().enumerate() {
        let id = id + 1;
        write!(
            out,
            ",\n{{\"ph\":\"s\",\"id\":{id},\"pid\":{PID},\"tid\":{},\"name\":\"drop_request\",\"cat\":\"gil\",\"ts\":{:.3}}}",
            f.from_row + 1,
            us(f.from_ns)
        )?;
        // "bp":"e": bind to the slice around the end, not the next one.
        write!(
            out,
            ",\n{{\"ph\":\"f\",\"bp\":\"e\",\"id\":{id},\"pid\":{PID},\"tid\":{},\"name\":\"drop_request\",\"cat\":\"gil\",\"ts\":{:.3}}}",
            f.to_row + 1,
            us(f.to_ns)
        )?;
    }
    for (t, n) in waiting_counts(trace, &timeline.rows) {
        write!(
            out,
            ",\n{{\"ph\":\"C\",\"pid\":{PID},\"name\":\"waiting threads\",\"cat\":\"gil\",\"ts\":{:.3},\"args\":{{\"waiting\":{n}}}}}",
            us(t)
        )?;
    }
    writeln!(out, "\n]}}")
}

/// An arrow from a drop request to the forced switch it caused, as row
/// indices (into [`Trace::rows`]) and times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Flow {
    /// The holder asked to drop.
    pub(super) from_row: usize,
    /// When it was asked.
    pub(super) from_ns: u64,
    /// The thread that took over, or the holder if that is unknown.
    pub(super) to_row: usize,
    /// When it took over, or when the holder noticed the switch.
    pub(super) to_ns: u64,
}

/// Pairs each drop request with the forced switch that answered it.
///
/// A request on holder H is answered if H's next [`EventKind::ForcedSwitch`]
/// comes before H acquires the lock again (an acquisition in between means
/// H let go some other way). The arrow ends where the new holder N (the
/// switch's `other`) acquired the lock — its latest acquisition between the
/// request and the switch — or, failing that, on H's row at the switch.
/// An arrow with an end that no span of its row contains (a switch at the
/// trace's last instant, say) is left out: Perfetto would bind it to nothing.
pub(super) fn drop_request_flows(trace: &Trace, timeline: &Timeline) -> Vec<Flow> {
    let rows = &timeline.rows;
    let mut flows = Vec::new();
    // Per row: unanswered requests; the latest acquisition.
    let mut pending: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut acquired: HashMap<usize, u64> = HashMap::new();
    // Per token: its latest row (the life `other` refers to).
    let mut row_of: HashMap<Token, usize> = HashMap::new();
    for (e, r) in trace.events.iter().zip(&timeline.event_rows) {
        let Some(r) = *r else { break };
        // As in the rows: nothing is placed before the trace's start.
        let t = e.time_ns.max(trace.start_ns);
        row_of.insert(e.token, r);
        match e.kind {
            EventKind::DropRequested => pending.entry(r).or_default().push(t),
            EventKind::Acquired => {
                pending.remove(&r);
                acquired.insert(r, t);
            }
            EventKind::ForcedSwitch => {
                let taker = e
                    .other
                    .and_then(|o| row_of.get(&o).copied())
                    .filter(|&n| n != r)
                    .and_then(|n| acquired.get(&n).map(|&at| (n, at)));
                for from_ns in pending.remove(&r).unwrap_or_default() {
                    if !in_a_span(&rows[r], from_ns) {
                        continue;
                    }
                    let to = taker
                        .filter(|&(n, at)| from_ns <= at && at <= t && in_a_span(&rows[n], at))
                        .or_else(|| in_a_span(&rows[r], t).then_some((r, t)));
                    if let Some((to_row, to_ns)) = to {
                        flows.push(Flow {
                            from_row: r,
                            from_ns,
                            to_row,
                            to_ns,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    flows
}

/// Whether one of `row`'s spans contains `t` (spans start inclusive).
fn in_a_span(row: &Row, t: u64) -> bool {
    let i = row.spans.partition_point(|s| s.end_ns <= t);
    row.spans.get(i).is_some_and(|s| s.start_ns <= t)
}

/// How many threads wait for the lock: `(time, count)` at the trace's start
/// and wherever the count changes. Taken from the rows' waiting spans, in
/// which a forced release and the wait that follows it are one stretch.
/// Waits still going when the trace ends do not end there.
pub(super) fn waiting_counts(trace: &Trace, rows: &[Row]) -> Vec<(u64, usize)> {
    let mut deltas: BTreeMap<u64, i64> = BTreeMap::new();
    for s in rows.iter().flat_map(|r| &r.spans) {
        if s.state == ThreadState::Waiting {
            *deltas.entry(s.start_ns).or_default() += 1;
            if s.end_ns < trace.end_ns {
                *deltas.entry(s.end_ns).or_default() -= 1;
            }
        }
    }
    let mut counts = Vec::new();
    let mut n = 0i64;
    for (t, d) in deltas {
        // Threads that stop waiting as others start, at the same instant,
        // are no change.
        if d != 0 {
            n += d;
            counts.push((t, usize::try_from(n).unwrap_or(0)));
        }
    }
    if counts.first().is_none_or(|&(t, _)| t > trace.start_ns) {
        counts.insert(0, (trace.start_ns, 0));
    }
    counts
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Event;
    use crate::reason::ReleaseReason;
    use serde_json::Value;

    fn ev(kind: EventKind, token: usize, other: Option<usize>, time_ns: u64) -> Event {
        Event {
            kind,
            token: Token::new(token).unwrap(),
            other: other.and_then(Token::new),
            time_ns,
        }
    }

    fn trace(events: Vec<Event>, end_ns: u64) -> Trace {
        Trace {
            start_ns: 0,
            end_ns,
            events,
            dropped: 0,
            ring: false,
            names: HashMap::new(),
            title: None,
        }
    }

    /// Threads 1 and 2 trade the lock through drop requests: answered by
    /// forced switches (the new holder known, then not), by a voluntary
    /// release, and not at all before the trace ends.
    fn trading() -> Trace {
        use EventKind::*;
        trace(
            vec![
                ev(Acquired, 1, None, 1),
                ev(WaitStart, 2, None, 2),
                ev(DropRequested, 1, Some(2), 10),
                ev(Released(ReleaseReason::Forced), 1, None, 11),
                ev(Acquired, 2, None, 12),
                ev(ForcedSwitch, 1, Some(2), 13), // 10 -> thread 2 at 12
                ev(WaitStart, 1, None, 14),
                ev(DropRequested, 2, Some(1), 20),
                ev(Released(ReleaseReason::Voluntary), 2, None, 21), // no arrow
                ev(Acquired, 1, None, 21),
                ev(WaitStart, 2, None, 25),
                ev(DropRequested, 1, Some(2), 30),
                ev(Released(ReleaseReason::Forced), 1, None, 31),
                ev(Acquired, 2, None, 32),
                ev(ForcedSwitch, 1, None, 33), // 30 -> its own row at 33
                ev(WaitStart, 1, None, 34),
                ev(DropRequested, 2, Some(1), 40),
                ev(Released(ReleaseReason::Forced), 2, None, 41),
                ev(Acquired, 1, None, 42),
                ev(ForcedSwitch, 2, Some(1), 43), // 40 -> thread 1 at 42
                ev(WaitStart, 2, None, 44),
                ev(DropRequested, 1, Some(2), 45), // unanswered when it ends
            ],
            50,
        )
    }

    fn flow(from_row: usize, from_ns: u64, to_row: usize, to_ns: u64) -> Flow {
        Flow {
            from_row,
            from_ns,
            to_row,
            to_ns,
        }
    }

    fn parse(trace: &Trace) -> Vec<Value> {
        let mut out = Vec::new();
        write(trace, &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        v["traceEvents"].as_array().unwrap().clone()
    }

    #[test]
    fn drop_requests_pair_with_the_forced_switches_they_caused() {
        let t = trading();
        let flows = drop_request_flows(&t, &t.timeline());
        assert_eq!(flows, vec![flow(0, 10, 1, 12), flow(0, 30, 0, 33), flow(1, 40, 0, 42)]);
    }

    #[test]
    fn a_trace_that_starts_at_a_request_still_has_its_arrow() {
        use EventKind::*;
        // The holder's row begins with the request; its release shows it
        // ran from the start, so the arrow has a slice to start from.
        let t = trace(
            vec![
                ev(DropRequested, 1, Some(2), 0),
                ev(WaitStart, 2, None, 0),
                ev(Released(ReleaseReason::Forced), 1, None, 5),
                ev(Acquired, 2, None, 6),
                ev(ForcedSwitch, 1, Some(2), 7),
            ],
            10,
        );
        assert_eq!(drop_request_flows(&t, &t.timeline()), vec![flow(0, 0, 1, 6)]);
    }

    #[test]
    fn an_arrow_end_outside_every_span_is_dropped() {
        use EventKind::*;
        // The switch is the trace's last instant: the holder's waiting span
        // ends there, so no slice contains the fallback end.
        let t = trace(
            vec![
                ev(Acquired, 1, None, 1),
                ev(WaitStart, 2, None, 2),
                ev(DropRequested, 1, Some(2), 5),
                ev(Released(ReleaseReason::Forced), 1, None, 6),
                ev(ForcedSwitch, 1, None, 10),
            ],
            10,
        );
        assert_eq!(drop_request_flows(&t, &t.timeline()), vec![]);
    }

    #[test]
    fn an_arrow_ends_at_the_switch_when_the_takeover_was_not_recorded() {
        use EventKind::*;
        // Thread 2's acquisition that took over from thread 1 is missing
        // (lost, or out of the buffer); its last one recorded predates the
        // request and did not take over from anybody's drop.
        let t = trace(
            vec![
                ev(Acquired, 2, None, 1),
                ev(Released(ReleaseReason::Voluntary), 2, None, 2),
                ev(Acquired, 1, None, 3),
                ev(DropRequested, 1, None, 5),
                ev(Released(ReleaseReason::Forced), 1, None, 6),
                ev(ForcedSwitch, 1, Some(2), 8),
            ],
            10,
        );
        assert_eq!(drop_request_flows(&t, &t.timeline()), vec![flow(1, 5, 1, 8)]);
    }

    #[test]
    fn the_json_has_an_s_and_an_f_event_with_the_same_id_per_arrow() {
        let t = trading();
        let events = parse(&t);
        let mut ends: BTreeMap<u64, (Vec<&Value>, Vec<&Value>)> = BTreeMap::new();
        for e in &events {
            match e["ph"].as_str() {
                Some("s") => ends.entry(e["id"].as_u64().unwrap()).or_default().0.push(e),
                Some("f") => ends.entry(e["id"].as_u64().unwrap()).or_default().1.push(e),
                _ => {}
            }
        }
        let at = |e: &Value| (e["tid"].as_u64().unwrap(), e["ts"].as_f64().unwrap());
        let mut got = Vec::new();
        for (s, f) in ends.values() {
            assert_eq!((s.len(), f.len()), (1, 1), "one start and one end per id");
            assert_eq!(
                (s[0]["name"].as_str(), f[0]["name"].as_str()),
                (Some("drop_request"), Some("drop_request"))
            );
            assert_eq!((s[0]["cat"].as_str(), f[0]["cat"].as_str()), (Some("gil"), Some("gil")));
            assert_eq!(f[0]["bp"].as_str(), Some("e"));
            got.push((at(s[0]), at(f[0])));
        }
        // Times are microseconds; tids are rows counted from one.
        assert_eq!(
            got,
            vec![
                ((1, 0.010), (2, 0.012)),
                ((1, 0.030), (1, 0.033)),
                ((2, 0.040), (1, 0.042))
            ]
        );
        // Each end lies inside a complete event of its thread.
        for &(tid, ts) in got.iter().flat_map(|(a, b)| [a, b]) {
            let inside = events.iter().any(|e| {
                e["ph"] == "X" && e["tid"].as_u64() == Some(tid) && {
                    let (from, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
                    from <= ts && ts < from + dur
                }
            });
            assert!(inside, "an arrow end at {ts} on tid {tid} is in no slice");
        }
    }

    /// Thread 2 waits; thread 1 is forced out and waits too (its forced
    /// release and its wait are one stretch); 2 takes over; 2 lets go and
    /// 1 takes the lock at the same instant.
    fn queueing() -> Trace {
        use EventKind::*;
        trace(
            vec![
                ev(Acquired, 1, None, 1),
                ev(WaitStart, 2, None, 10),
                ev(DropRequested, 1, Some(2), 15),
                ev(Released(ReleaseReason::Forced), 1, None, 20),
                ev(Acquired, 2, None, 30),
                ev(ForcedSwitch, 1, Some(2), 31),
                ev(WaitStart, 1, None, 32),
                ev(Released(ReleaseReason::Voluntary), 2, None, 40),
                ev(Acquired, 1, None, 40),
            ],
            50,
        )
    }

    #[test]
    fn the_waiting_count_changes_where_waits_start_and_end() {
        let t = queueing();
        assert_eq!(
            waiting_counts(&t, &t.rows()),
            vec![(0, 0), (10, 1), (20, 2), (30, 1), (40, 0)]
        );
    }

    #[test]
    fn a_wait_ending_as_another_starts_is_no_change() {
        use EventKind::*;
        let t = trace(
            vec![
                ev(Acquired, 1, None, 1),
                ev(WaitStart, 2, None, 5),
                ev(Released(ReleaseReason::Voluntary), 1, None, 10),
                ev(Acquired, 2, None, 10),
                ev(WaitStart, 1, None, 10),
            ],
            20,
        );
        assert_eq!(waiting_counts(&t, &t.rows()), vec![(0, 0), (5, 1)]);
    }

    #[test]
    fn a_wait_cut_by_the_trace_end_does_not_end_the_count() {
        use EventKind::*;
        let t = trace(vec![ev(Acquired, 1, None, 1), ev(WaitStart, 2, None, 5)], 9);
        assert_eq!(waiting_counts(&t, &t.rows()), vec![(0, 0), (5, 1)]);
    }

    #[test]
    fn the_json_has_a_waiting_threads_counter() {
        let samples: Vec<(f64, u64)> = parse(&queueing())
            .iter()
            .filter(|e| e["ph"] == "C")
            .map(|e| {
                assert_eq!(e["name"], "waiting threads");
                assert_eq!(e["pid"], PID);
                (e["ts"].as_f64().unwrap(), e["args"]["waiting"].as_u64().unwrap())
            })
            .collect();
        assert_eq!(samples, vec![(0.0, 0), (0.010, 1), (0.020, 2), (0.030, 1), (0.040, 0)]);
    }

    #[test]
    fn json_strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(json_string("a\"b\\c\nd\u{1}é"), "\"a\\\"b\\\\c\\nd\\u0001é\"");
    }
}
