//! Per-thread totals of a trace, and a plain-text table of them for a
//! report: how long each thread ran, waited and spent in calls, how often
//! it took the lock, was asked to drop it and was forced out.

use std::io::{self, Write};

use super::{MarkKind, ThreadState, Trace};
use crate::events::EventKind;
use crate::Token;

/// One row's totals (see [`Trace::summaries`]).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowSummary {
    /// The thread.
    pub token: Token,
    /// Its row's name.
    pub name: String,
    /// Time it held the lock, in nanoseconds.
    pub running_ns: u64,
    /// Time it waited for the lock (forced releases included).
    pub waiting_ns: u64,
    /// Time it spent in system calls, having released the lock voluntarily.
    pub syscall_ns: u64,
    /// How many times it took the lock (reclaims after a lazy release
    /// included).
    pub acquisitions: u64,
    /// How many times it was asked to drop the lock.
    pub drop_requests: u64,
    /// How many of its forced releases ended with another thread taking over.
    pub forced_switches: u64,
}

pub(super) fn summaries(trace: &Trace) -> Vec<RowSummary> {
    let timeline = trace.timeline();
    let mut out: Vec<RowSummary> = timeline
        .rows
        .iter()
        .map(|row| {
            let time_in = |state| {
                row.spans
                    .iter()
                    .filter(|s| s.state == state)
                    .map(|s| s.end_ns - s.start_ns)
                    .sum()
            };
            let marks = |kind| row.marks.iter().filter(|m| m.kind == kind).count() as u64;
            RowSummary {
                token: row.token,
                name: row.name.clone(),
                running_ns: time_in(ThreadState::Running),
                waiting_ns: time_in(ThreadState::Waiting),
                syscall_ns: time_in(ThreadState::Syscall),
                acquisitions: 0,
                drop_requests: marks(MarkKind::DropRequested),
                forced_switches: marks(MarkKind::ForcedSwitch),
            }
        })
        .collect();
    // Acquisitions are not marks: count them per life from the events.
    for (e, r) in trace.events.iter().zip(&timeline.event_rows) {
        if let (EventKind::Acquired, Some(r)) = (e.kind, r) {
            out[*r].acquisitions += 1;
        }
    }
    out
}

/// How a summary fills one cell.
type Cell = fn(&RowSummary) -> String;

/// The table's columns after the thread's name: heading, and cell.
const NUMBERS: [(&str, Cell); 6] = [
    ("running ms", |s| ms(s.running_ns)),
    ("waiting ms", |s| ms(s.waiting_ns)),
    ("in calls ms", |s| ms(s.syscall_ns)),
    ("acquisitions", |s| s.acquisitions.to_string()),
    ("drop requests", |s| s.drop_requests.to_string()),
    ("forced switches", |s| s.forced_switches.to_string()),
];

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

pub(super) fn write_table(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    let rows = summaries(trace);
    let mut note = String::new();
    if let Some(title) = &trace.title {
        note.push_str(title);
        note.push_str(": ");
    }
    note.push_str(&format!(
        "{} ms traced, {} events, {} threads",
        ms(trace.duration_ns()),
        trace.events.len(),
        rows.len()
    ));
    // Which end lost events decides which totals are short.
    if trace.dropped > 0 && trace.ring {
        note.push_str(&format!(
            "; {} older events overwritten, the trace starts at the oldest kept",
            trace.dropped
        ));
    } else if trace.dropped > 0 {
        note.push_str(&format!(
            "; {} more events lost (the buffer was full), the trace ends at the first",
            trace.dropped
        ));
    }
    writeln!(out, "{note}")?;

    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|s| NUMBERS.iter().map(|(_, cell)| cell(s)).collect())
        .collect();
    let chars = |s: &str| s.chars().count();
    let name_w = rows.iter().map(|s| chars(&s.name)).fold(chars("thread"), usize::max);
    let widths: Vec<usize> = NUMBERS
        .iter()
        .enumerate()
        .map(|(k, (head, _))| cells.iter().map(|c| c[k].len()).fold(head.len(), usize::max))
        .collect();
    write!(out, "{:<name_w$}", "thread")?;
    for ((head, _), w) in NUMBERS.iter().zip(&widths) {
        write!(out, "  {head:>w$}")?;
    }
    writeln!(out)?;
    for (s, row) in rows.iter().zip(&cells) {
        write!(out, "{:<name_w$}", s.name)?;
        for (cell, w) in row.iter().zip(&widths) {
            write!(out, "  {cell:>w$}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::events::Event;
    use crate::reason::ReleaseReason;

    /// A tenth of a millisecond: the table shows milliseconds.
    const U: u64 = 100_000;

    fn ev(kind: EventKind, token: usize, time: u64) -> Event {
        Event {
            kind,
            token: Token::new(token).unwrap(),
            other: None,
            time_ns: time * U,
        }
    }

    /// Thread 1 takes the lock at the start, is asked to drop and forced out to
    /// thread 2, takes the lock back, makes a call, takes it back again.
    /// Thread 2 makes its final release, and its token comes back as a new
    /// life that waits until the end.
    fn busy() -> Trace {
        use EventKind::*;
        Trace {
            start_ns: 0,
            end_ns: 100 * U,
            events: vec![
                ev(Acquired, 1, 0),
                ev(WaitStart, 2, 5),
                ev(DropRequested, 1, 10),
                ev(Released(ReleaseReason::Forced), 1, 12),
                ev(Acquired, 2, 15),
                ev(ForcedSwitch, 1, 16),
                ev(WaitStart, 1, 17),
                ev(Released(ReleaseReason::Final), 2, 30),
                ev(Acquired, 1, 30),
                ev(Released(ReleaseReason::Voluntary), 1, 50),
                ev(Acquired, 1, 70),
                ev(WaitStart, 2, 80),
            ],
            dropped: 0,
            ring: false,
            names: HashMap::from([(Token::new(1).unwrap(), vec![(0, "main".to_string())])]),
            title: None,
        }
    }

    #[test]
    fn summaries_sum_each_rows_spans_and_count_its_events() {
        let s = summaries(&busy());
        let got: Vec<_> = s
            .iter()
            .map(|s| {
                (
                    s.token.get(),
                    [s.running_ns / U, s.waiting_ns / U, s.syscall_ns / U],
                    [s.acquisitions, s.drop_requests, s.forced_switches],
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                // Ran 0-12, 30-50 and 70-100; waited 12-30; in a call 50-70.
                (1, [62, 18, 20], [3, 1, 1]),
                (2, [15, 10, 0], [1, 0, 0]),
                (2, [0, 20, 0], [0, 0, 0]),
            ]
        );
        // Rows in the same order and with the same names as rows().
        let names: Vec<_> = s.iter().map(|s| s.name.clone()).collect();
        let rows: Vec<_> = busy().rows().into_iter().map(|r| r.name).collect();
        assert_eq!(names, rows);
        assert_eq!(names[0], "main");
    }

    #[test]
    fn the_table_has_a_note_a_header_and_aligned_columns() {
        let mut t = busy();
        t.dropped = 3;
        t.ring = true;
        t.title = Some("classic".into());
        let mut out = Vec::new();
        write_table(&t, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2 + 3, "{text}");
        assert_eq!(
            lines[0],
            "classic: 10.000 ms traced, 12 events, 3 threads; \
             3 older events overwritten, the trace starts at the oldest kept"
        );
        let header = lines[1];
        assert!(header.starts_with("thread "), "{text}");
        // Each column's values end where its heading ends, after a space.
        let ends: Vec<usize> = NUMBERS
            .iter()
            .map(|(head, _)| header.find(head).unwrap() + head.len())
            .collect();
        for line in &lines[2..] {
            assert_eq!(line.len(), header.len(), "{text}");
            let words: Vec<&str> = line.split_whitespace().collect();
            let values = &words[words.len() - NUMBERS.len()..];
            for (&end, value) in ends.iter().zip(values) {
                assert_eq!(&line[end - value.len()..end], *value, "{text}");
                assert_eq!(line.as_bytes()[end - value.len() - 1], b' ', "{text}");
            }
        }
        let main: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(main, ["main", "6.200", "1.800", "2.000", "3", "1", "1"]);
    }

    #[test]
    fn the_note_says_a_full_buffer_cut_the_end() {
        let mut t = busy();
        t.dropped = 4;
        let mut out = Vec::new();
        write_table(&t, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with(
                "10.000 ms traced, 12 events, 3 threads; \
                 4 more events lost (the buffer was full), the trace ends at the first\n"
            ),
            "{text}"
        );
    }
}
