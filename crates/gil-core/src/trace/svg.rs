//! The SVG timeline: one row per thread, one pixel column per slice of time.
//!
//! Each column of a row is drawn as the shares of that slice the thread
//! spent running, waiting and in a system call, stacked; runs of columns
//! with the same shares become one rectangle. A long stretch in one state is
//! one rectangle, and a trace of a million events is still a few thousand
//! rectangles per row at most.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::{self, Write};

use super::{xml_escape, MarkKind, Row, ThreadState, Trace};

/// The narrowest label column, in pixels; it widens to fit the longest
/// row name up to `MAX_LABEL_W`, and a longer name is elided in the middle
/// (its whole text stays in the row's tooltip).
const MIN_LABEL_W: u32 = 190;
const MAX_LABEL_W: u32 = 420;
/// Pixels a character takes at most at 12 px sans-serif (wide capitals,
/// digits are narrower): a budget that never cuts a label.
const CHAR_W: u32 = 8;
/// Room right of the plot for each row's "run % · wait %".
const RIGHT_W: u32 = 150;
const PLOT_W: usize = 880;
const ROW_H: u32 = 22;
const ROW_GAP: u32 = 12;
const TOP: u32 = 92;
/// A row's background: time before its first event.
const UNKNOWN: &str = "#f1f3f5";
/// A row after its thread's final release: grey hatching (`<defs>`), so
/// that an ended thread never looks like one not seen yet.
const ENDED: &str = "url(#ended)";

fn colour(state: ThreadState) -> &'static str {
    match state {
        ThreadState::Running => "#2f9e44",
        ThreadState::Waiting => "#f03e3e",
        ThreadState::Syscall => "#a5d8ff",
    }
}

fn label(state: ThreadState) -> &'static str {
    match state {
        ThreadState::Running => "running (holds the lock)",
        ThreadState::Waiting => "waiting for the lock",
        ThreadState::Syscall => "in a system call (released)",
    }
}

/// The label column for names up to `longest` characters.
fn label_width(longest: usize) -> u32 {
    let want = u32::try_from(longest)
        .unwrap_or(u32::MAX)
        .saturating_mul(CHAR_W)
        .saturating_add(16);
    want.clamp(MIN_LABEL_W, MAX_LABEL_W)
}

/// `name` shortened to `max` characters by an ellipsis in its middle, so
/// that both its start (a thread's name) and its end (its ident) show.
fn elide_middle(name: &str, max: usize) -> String {
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= max {
        return name.to_owned();
    }
    let keep = max.saturating_sub(1);
    let head = keep - keep / 2;
    let tail = keep / 2;
    let mut out: String = chars[..head].iter().collect();
    out.push('\u{2026}');
    out.extend(&chars[chars.len() - tail..]);
    out
}

pub(super) fn write(trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
    let rows = trace.rows();
    let longest = rows.iter().map(|r| r.name.chars().count()).max().unwrap_or(0);
    let label_w = label_width(longest);
    let width = label_w + PLOT_W as u32 + RIGHT_W;
    let height = TOP + rows.len().max(1) as u32 * (ROW_H + ROW_GAP) + 40;
    let dur = trace.duration_ns().max(1);
    let mut s = String::new();
    // Writing into a String cannot fail; `let _ =` keeps that visible.
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{width}" height="{height}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r##"<defs><pattern id="ended" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#e9ecef"/><rect width="2" height="6" fill="#868e96"/></pattern></defs>"##
    );
    let title = trace.title.as_deref().unwrap_or("who held the lock when");
    let _ = writeln!(
        s,
        r#"<text x="10" y="22" font-size="16" font-weight="bold">{}</text>"#,
        xml_escape(title)
    );
    let mut sub = format!(
        "{} over {}, {} threads, {} events",
        "timeline",
        human(dur),
        rows.len(),
        trace.events.len()
    );
    if trace.dropped > 0 && trace.ring {
        let _ = write!(
            sub,
            " ({} older events overwritten: the trace starts at the oldest kept)",
            trace.dropped
        );
    } else if trace.dropped > 0 {
        let _ = write!(
            sub,
            " ({} more events lost: the buffer was full; the trace ends there)",
            trace.dropped
        );
    }
    let _ = writeln!(s, r##"<text x="10" y="40" fill="#444">{}</text>"##, xml_escape(&sub));
    legend(&mut s);

    let x0 = f64::from(label_w);
    let px = PLOT_W as f64 / dur as f64; // pixels per nanosecond
    axis(&mut s, dur, x0, px, TOP - 6, height - 34);
    for (i, row) in rows.iter().enumerate() {
        let y = TOP + i as u32 * (ROW_H + ROW_GAP);
        draw_row(&mut s, trace, row, y, dur, label_w);
    }
    s.push_str("</svg>\n");
    out.write_all(s.as_bytes())
}

fn legend(s: &mut String) {
    let mut x = 10;
    for state in ThreadState::ALL {
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="52" width="14" height="12" fill="{}"/><text x="{}" y="62">{}</text>"#,
            colour(state),
            x + 18,
            label(state)
        );
        x += 30 + 7 * label(state).len() as u32;
    }
    // A row is blank before its first event, unless that event tells what
    // the thread was doing (a release: it was running).
    let _ = writeln!(
        s,
        r##"<rect x="{x}" y="52" width="14" height="12" fill="{UNKNOWN}" stroke="#ced4da"/><text x="{}" y="62">not seen yet</text>"##,
        x + 18
    );
    x += 30 + 7 * "not seen yet".len() as u32;
    let _ = writeln!(
        s,
        r##"<rect x="{x}" y="52" width="14" height="12" fill="{ENDED}" stroke="#ced4da"/><text x="{}" y="62">ended</text>"##,
        x + 18
    );
    x += 30 + 7 * "ended".len() as u32;
    for kind in [MarkKind::DropRequested, MarkKind::ForcedSwitch, MarkKind::LazyTakeover] {
        mark_shape(s, kind, x as f64 + 6.0, 52);
        let text = match kind {
            MarkKind::DropRequested => "asked to drop",
            MarkKind::ForcedSwitch => "forced switch done",
            MarkKind::LazyTakeover => "call taken over",
        };
        let _ = writeln!(s, r#"<text x="{}" y="62">{text}</text>"#, x + 16);
        x += 30 + 7 * text.len() as u32;
    }
}

/// A mark's shape, centred on `x`, in the band from `y` to `y + 12`.
fn mark_shape(s: &mut String, kind: MarkKind, x: f64, y: u32) {
    let y = y as f64;
    let _ = match kind {
        // A downward triangle: "let go".
        MarkKind::DropRequested => writeln!(
            s,
            r##"<path d="M{:.1} {:.1}h8l-4 7z" fill="#1c1c1c"/>"##,
            x - 4.0,
            y + 2.0
        ),
        MarkKind::ForcedSwitch => writeln!(
            s,
            r##"<rect x="{:.1}" y="{:.1}" width="1.5" height="12" fill="#5f3dc4"/>"##,
            x - 0.75,
            y
        ),
        MarkKind::LazyTakeover => writeln!(
            s,
            r##"<path d="M{:.1} {:.1}l4 4l-4 4l-4 -4z" fill="#e67700"/>"##,
            x,
            y + 2.0
        ),
    };
}

/// Tick spacing: 1, 2 or 5 times a power of ten nanoseconds, about 8 ticks.
fn tick_step(dur: u64) -> u64 {
    let target = (dur / 8).max(1);
    let mut p = 1u64;
    loop {
        for m in [1, 2, 5] {
            if p.saturating_mul(m) >= target {
                return p.saturating_mul(m);
            }
        }
        p = p.saturating_mul(10);
    }
}

fn axis(s: &mut String, dur: u64, x0: f64, px: f64, top: u32, bottom: u32) {
    let step = tick_step(dur);
    let mut t = 0;
    while t <= dur {
        let x = x0 + t as f64 * px;
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{bottom}" stroke="#dee2e6"/><text x="{x:.1}" y="{}" text-anchor="middle" fill="#444">{}</text>"##,
            bottom + 14,
            human(t)
        );
        t = match t.checked_add(step) {
            Some(n) => n,
            None => break,
        };
    }
}

/// `ns` as a short duration: `750 µs`, `12.5 ms`, `2 s`.
fn human(ns: u64) -> String {
    let trim = |v: f64| {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{} µs", trim(ns as f64 / 1e3))
    } else if ns < 1_000_000_000 {
        format!("{} ms", trim(ns as f64 / 1e6))
    } else {
        format!("{} s", trim(ns as f64 / 1e9))
    }
}

fn draw_row(s: &mut String, trace: &Trace, row: &Row, y: u32, dur: u64, label_w: u32) {
    let col_ns = dur as f64 / PLOT_W as f64;
    // Nanoseconds each column spent in each state.
    let mut cols = vec![[0f64; 3]; PLOT_W];
    let mut totals = [0u64; 3];
    for span in &row.spans {
        let k = state_index(span.state);
        totals[k] += span.end_ns - span.start_ns;
        let (a, b) = (
            (span.start_ns - trace.start_ns) as f64,
            (span.end_ns - trace.start_ns) as f64,
        );
        let first = ((a / col_ns) as usize).min(PLOT_W - 1);
        let last = ((b / col_ns) as usize).min(PLOT_W - 1);
        for (c, col) in cols.iter_mut().enumerate().take(last + 1).skip(first) {
            let (lo, hi) = (c as f64 * col_ns, (c + 1) as f64 * col_ns);
            col[k] += (b.min(hi) - a.max(lo)).max(0.0);
        }
    }
    // Label, with the totals as a tooltip.
    let pct = |n: u64| 100.0 * n as f64 / dur as f64;
    let summary = format!(
        "running {:.1}%, waiting {:.1}%, in a system call {:.1}%; {} drop requests",
        pct(totals[0]),
        pct(totals[1]),
        pct(totals[2]),
        row.marks.iter().filter(|m| m.kind == MarkKind::DropRequested).count()
    );
    let fits = ((label_w - 16) / CHAR_W) as usize;
    let name = xml_escape(&elide_middle(&row.name, fits));
    let summary = format!("{}: {summary}", row.name);
    let _ = writeln!(
        s,
        r#"<g><title>{}</title><text x="{}" y="{}" text-anchor="end">{}</text></g>"#,
        xml_escape(&summary),
        label_w - 8,
        y + ROW_H / 2 + 4,
        name
    );
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" fill="#444" font-size="11">run {:.0}% · wait {:.0}%</text>"##,
        label_w as usize + PLOT_W + 8,
        y + ROW_H / 2 + 4,
        pct(totals[0]),
        pct(totals[1])
    );
    let _ = writeln!(
        s,
        r##"<rect x="{label_w}" y="{y}" width="{PLOT_W}" height="{ROW_H}" fill="{UNKNOWN}"/>"##
    );
    if let Some(end) = row.ended_ns {
        // From the first column wholly after the final release.
        let from = (((end - trace.start_ns) as f64 / col_ns).ceil() as usize).min(PLOT_W);
        if from < PLOT_W {
            let _ = writeln!(
                s,
                r#"<rect x="{}" y="{y}" width="{}" height="{ROW_H}" fill="{ENDED}"><title>ended</title></rect>"#,
                label_w as usize + from,
                PLOT_W - from
            );
        }
    }
    // Column heights in whole pixels; equal neighbours merge.
    let heights: Vec<[u32; 3]> = cols
        .iter()
        .map(|col| col.map(|ns| ((ns / col_ns).clamp(0.0, 1.0) * ROW_H as f64).round() as u32))
        .collect();
    let mut c = 0;
    while c < PLOT_W {
        let h = heights[c];
        let mut end = c + 1;
        while end < PLOT_W && heights[end] == h {
            end += 1;
        }
        let mut top = y;
        for state in ThreadState::ALL {
            let hk = h[state_index(state)].min(y + ROW_H - top);
            if hk > 0 {
                let _ = writeln!(
                    s,
                    r#"<rect x="{}" y="{top}" width="{}" height="{hk}" fill="{}"/>"#,
                    label_w as usize + c,
                    end - c,
                    colour(state)
                );
                top += hk;
            }
        }
        c = end;
    }
    // Marks: at most one of each kind per column.
    for kind in [MarkKind::ForcedSwitch, MarkKind::LazyTakeover, MarkKind::DropRequested] {
        let columns: BTreeSet<usize> = row
            .marks
            .iter()
            .filter(|m| m.kind == kind)
            .map(|m| (((m.time_ns - trace.start_ns) as f64 / col_ns) as usize).min(PLOT_W - 1))
            .collect();
        for c in columns {
            let x = f64::from(label_w) + c as f64 + 0.5;
            let band = match kind {
                MarkKind::DropRequested => y - 10,
                _ => y + (ROW_H - 12) / 2,
            };
            mark_shape(s, kind, x, band);
        }
    }
}

fn state_index(state: ThreadState) -> usize {
    match state {
        ThreadState::Running => 0,
        ThreadState::Waiting => 1,
        ThreadState::Syscall => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subtitle_says_which_end_lost_events() {
        use crate::events::{Event, EventKind};
        let tracer = crate::trace::Tracer::new_ring(1);
        let token = crate::Token::new(1).unwrap();
        for _ in 0..3 {
            tracer.record(&Event::now(EventKind::Acquired, token, None));
        }
        let mut svg = Vec::new();
        write(&tracer.finish(), &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.contains("2 older events overwritten"), "{svg}");
        assert!(!svg.contains("the trace ends there"));
    }

    #[test]
    fn long_row_names_widen_the_column_then_are_elided_in_the_middle() {
        assert_eq!(label_width(5), MIN_LABEL_W);
        // CPython's "MainThread (140535527861568)", 28 characters, fits whole.
        let name = "MainThread (140535527861568)";
        let w = label_width(name.chars().count());
        assert!(w > MIN_LABEL_W && w < MAX_LABEL_W);
        assert_eq!(elide_middle(name, ((w - 16) / CHAR_W) as usize), name);
        assert_eq!(label_width(500), MAX_LABEL_W);
        let long = format!("worker-{}-(1234567)", "x".repeat(100));
        let short = elide_middle(&long, 20);
        assert_eq!(short.chars().count(), 20);
        assert!(short.starts_with("worker-") && short.ends_with("(1234567)"), "{short}");
        assert!(short.contains('\u{2026}'));
    }

    #[test]
    fn ticks_are_round_numbers() {
        assert_eq!(tick_step(80), 10);
        assert_eq!(tick_step(30_000_000), 5_000_000);
        assert_eq!(tick_step(1), 1);
        assert!(tick_step(u64::MAX) >= u64::MAX / 8);
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human(999), "999 ns");
        assert_eq!(human(750_000), "750 µs");
        assert_eq!(human(12_500_000), "12.5 ms");
        assert_eq!(human(2_000_000_000), "2 s");
    }
}
