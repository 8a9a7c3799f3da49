//! Chrome trace-event JSON ("JSON Object Format"): what Perfetto and
//! `chrome://tracing` open. Times are microseconds from the trace's start.

use std::io::{self, Write};

use super::Trace;

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
    for (i, row) in trace.rows().iter().enumerate() {
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
    writeln!(out, "\n]}}")
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

    #[test]
    fn json_strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(json_string("a\"b\\c\nd\u{1}é"), "\"a\\\"b\\\\c\\nd\\u0001é\"");
    }
}
