//! Traces of real threads on a real lock: the rebuilt timelines, and the
//! Chrome JSON and SVG files made from them.
#![cfg(not(gil_loom))]

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use gil_core::trace::{Row, ThreadState, Trace, TraceFormat, Tracer};
use gil_core::{EventKind, Gil, GilConfig, ReleaseReason};

mod common;
use common::tok;

/// Two CPU-bound threads that poll the drop request, and one I/O-like
/// thread that releases around a short sleep, for `ms` milliseconds, traced.
fn traced_run(config: GilConfig, ms: u64) -> (Trace, gil_core::Counters) {
    let gil = Arc::new(Gil::new(config.switch_interval_us(500)).unwrap());
    let tracer = Tracer::new(Tracer::DEFAULT_MAX_EVENTS);
    tracer.set_title("test <run> & \"friends\"");
    tracer.name_thread(tok(1), "io");
    gil.set_event_hook(Some(tracer.hook())).expect("not inside a hook");
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(4));
    let mut threads = Vec::new();
    for n in 1..=3 {
        let (gil, stop, start) = (gil.clone(), stop.clone(), start.clone());
        threads.push(thread::spawn(move || {
            let me = tok(n);
            start.wait();
            gil.acquire(me).unwrap();
            while !stop.load(Relaxed) {
                if n == 1 {
                    gil.release(me, ReleaseReason::Voluntary).unwrap();
                    thread::sleep(Duration::from_micros(300));
                    gil.acquire(me).unwrap();
                } else {
                    gil.handle_drop_request(me).unwrap();
                    std::hint::spin_loop();
                }
            }
            gil.release(me, ReleaseReason::Final).unwrap();
        }));
    }
    start.wait();
    thread::sleep(Duration::from_millis(ms));
    stop.store(true, Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    gil.set_event_hook(None).expect("not inside a hook");
    (tracer.finish(), gil.counters())
}

fn running(row: &Row) -> impl Iterator<Item = (u64, u64)> + '_ {
    row.spans
        .iter()
        .filter(|s| s.state == ThreadState::Running)
        .map(|s| (s.start_ns, s.end_ns))
}

#[test]
fn timelines_show_one_holder_at_a_time_for_every_preset() {
    for &preset in gil_core::PRESETS {
        let (trace, counters) = traced_run(GilConfig::preset(preset).unwrap(), 30);
        assert_eq!(trace.dropped, 0);
        // The hook saw every acquisition of the run.
        let acquired = trace.events.iter().filter(|e| e.kind == EventKind::Acquired).count() as u64;
        assert_eq!(acquired, counters.acquisitions, "{preset}");

        let rows = trace.rows();
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(rows.len(), 3, "{preset}: one row per thread, not {names:?}");
        assert_eq!(
            rows.iter().filter(|r| r.name == "io").count(),
            1,
            "{preset}: the named row"
        );
        let mut all: Vec<(u64, u64)> = Vec::new();
        for row in &rows {
            // A row's spans are in order, non-empty and do not overlap.
            for w in row.spans.windows(2) {
                assert!(w[0].end_ns <= w[1].start_ns, "{preset}: {:?} overlaps {:?}", w[0], w[1]);
            }
            assert!(row.spans.iter().all(|s| s.start_ns < s.end_ns));
            all.extend(running(row));
        }
        // Released is stamped before the lock is let go and Acquired after
        // it is won, so no two threads are ever seen running at once.
        all.sort();
        for w in all.windows(2) {
            assert!(
                w[0].1 <= w[1].0,
                "{preset}: two holders at once: {:?} and {:?}",
                w[0],
                w[1]
            );
        }
        // Every thread both ran and (with two CPU threads) waited.
        for row in &rows {
            assert!(running(row).next().is_some(), "{preset}: {} never ran", row.name);
        }
        assert!(rows
            .iter()
            .any(|r| r.spans.iter().any(|s| s.state == ThreadState::Waiting)));
    }
}

#[test]
fn chrome_json_has_a_complete_event_per_span_and_named_threads() {
    let (trace, _) = traced_run(GilConfig::preset("classic").unwrap(), 20);
    let mut out = Vec::new();
    trace.write_chrome_json(&mut out).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    let rows = trace.rows();
    let spans: usize = rows.iter().map(|r| r.spans.len()).sum();
    let marks: usize = rows.iter().map(|r| r.marks.len()).sum();
    let count = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    assert_eq!(count("X"), spans);
    assert_eq!(count("i"), marks);
    let names: HashSet<&str> = events
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains("io"));
    assert_eq!(names.len(), rows.len());
    assert_eq!(doc["otherData"]["title"], "test <run> & \"friends\"");
    // Durations are non-negative microseconds inside the trace.
    let end_us = trace.duration_ns() as f64 / 1e3;
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
        assert!(ts >= 0.0 && dur >= 0.0 && ts + dur <= end_us + 0.001, "{e}");
    }
}

#[test]
fn svg_is_well_formed_with_a_row_per_thread() {
    let (trace, _) = traced_run(GilConfig::preset("priority").unwrap(), 20);
    let mut out = Vec::new();
    trace.write_svg(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    let texts: Vec<String> = root
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| {
            n.children()
                .filter(|c| c.is_text())
                .map(|c| c.text().unwrap())
                .collect()
        })
        .collect();
    assert!(
        texts.iter().any(|t| t == "test <run> & \"friends\""),
        "the title, unescaped"
    );
    for row in trace.rows() {
        assert!(texts.contains(&row.name), "no label for {}", row.name);
    }
    // Colour per state: the run had running, waiting and system-call time.
    let fills: HashSet<&str> = root.descendants().filter_map(|n| n.attribute("fill")).collect();
    assert!(fills.len() >= 4, "{fills:?}");
}

#[test]
fn write_to_picks_the_format_and_reports_io_errors() {
    let (trace, _) = traced_run(GilConfig::new(), 5);
    let dir = std::env::temp_dir().join(format!("gil-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("t.json");
    trace.write_to(&json, TraceFormat::from_path(&json).unwrap()).unwrap();
    assert!(std::fs::read_to_string(&json).unwrap().contains("traceEvents"));
    let svg = dir.join("t.svg");
    trace.write_to(&svg, TraceFormat::from_path(&svg).unwrap()).unwrap();
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    let missing = dir.join("no/such/dir/t.svg");
    assert!(trace.write_to(&missing, TraceFormat::Svg).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_trace_session_writes_its_file_and_refuses_unknown_formats() {
    use gil_core::trace::TraceSession;
    let dir = std::env::temp_dir().join(format!("gil-session-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("trace.txt");
    let err = TraceSession::create(&bad, 0).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(!bad.exists(), "nothing is created for an unknown format");
    let path = dir.join("trace.json");
    let session = TraceSession::create(&path, 0).unwrap();
    assert!(!path.exists(), "nothing is at the name until the trace is written");
    let gil = Gil::new(GilConfig::new()).unwrap();
    gil.set_event_hook(Some(session.tracer().hook())).unwrap();
    gil.acquire(tok(1)).unwrap();
    gil.release(tok(1), ReleaseReason::Final).unwrap();
    gil.set_event_hook(None).unwrap();
    assert_eq!(session.finish().unwrap(), 2, "acquired and released");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"traceEvents\""));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Acquires and releases `n` once on `gil` (an uncontended lock: no wait).
fn hold(gil: &Gil, n: usize, reason: ReleaseReason) {
    gil.acquire(tok(n)).unwrap();
    gil.release(tok(n), reason).unwrap();
}

/// Names `count` times one token that uses the lock, and `count` tokens
/// that never do, with short lives of others in between, on `tracer`;
/// returns the most names it held at once, and the trace.
fn name_many_times(tracer: &Arc<Tracer>, count: usize) -> (usize, Trace) {
    let gil = Gil::new(GilConfig::new()).unwrap();
    gil.set_event_hook(Some(tracer.hook())).unwrap();
    let mut most = 0;
    for i in 0..count {
        // One token renamed again and again, in one life.
        tracer.name_thread(tok(1), if i % 2 == 0 { "even" } else { "odd" });
        // Tokens named once, none of which uses the lock.
        tracer.name_thread(tok(10_000_000 + i), "never seen");
        if i % 100 == 0 {
            hold(&gil, 1, ReleaseReason::Voluntary);
            tracer.name_thread(tok(2 + i % 5000), "short");
            hold(&gil, 2 + i % 5000, ReleaseReason::Final);
        }
        most = most.max(tracer.names_kept());
    }
    gil.set_event_hook(None).unwrap();
    (most, tracer.finish())
}

#[test]
fn a_ring_keeps_names_bounded_by_its_events_however_many_are_given() {
    const MAX: usize = 1000;
    let (most, trace) = name_many_times(&Tracer::new_ring(MAX), 50_000);
    assert!(most <= 2 * MAX, "{most} names kept");
    assert!(trace.names.values().map(Vec::len).sum::<usize>() <= 2 * MAX);
    // The renamed token's events are in the ring: its latest name.
    let rows = trace.rows();
    let one = rows.iter().find(|r| r.token == tok(1)).expect("token 1 ran lately");
    assert_eq!(one.name, "odd");
}

#[test]
fn a_full_tracer_keeps_names_bounded_by_its_events_too() {
    const MAX: usize = 1000;
    let (most, trace) = name_many_times(&Tracer::new(MAX), 50_000);
    assert!(trace.dropped > 0, "the tracer filled up");
    assert!(most <= 2 * MAX, "{most} names kept");
    // Token 1 ran at the start, kept: its latest name.
    assert_eq!(trace.rows()[0].token, tok(1));
    assert_eq!(trace.rows()[0].name, "odd");
}

#[test]
fn a_ring_shows_the_names_of_the_lives_it_kept_after_many_other_names() {
    const MAX: usize = 64;
    let tracer = Tracer::new_ring(MAX);
    let gil = Gil::new(GilConfig::new()).unwrap();
    gil.set_event_hook(Some(tracer.hook())).unwrap();
    let spam = |from: usize| {
        for i in 0..10 * MAX {
            tracer.name_thread(tok(1_000_000 + from + i), "never seen");
        }
    };
    // Named before its first event, which the ring keeps.
    tracer.name_thread(tok(1), "named early");
    gil.acquire(tok(1)).unwrap();
    spam(0);
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    // Two lives of one token, each named late: the first after it ended
    // (by when it began), the second now.
    gil.acquire(tok(2)).unwrap();
    let first_life = gil_core::now_ns();
    gil.release(tok(2), ReleaseReason::Final).unwrap();
    hold(&gil, 2, ReleaseReason::Final);
    spam(100_000);
    tracer.name_thread_at(tok(2), first_life, "first life");
    spam(200_000);
    tracer.name_thread(tok(2), "second life");
    // Renamed many times among other names: the last rename shows.
    gil.acquire(tok(3)).unwrap();
    for k in 0..1000 {
        tracer.name_thread(tok(3), format!("rename {k}"));
        tracer.name_thread(tok(2_000_000 + k), "never seen");
    }
    gil.release(tok(3), ReleaseReason::Voluntary).unwrap();
    spam(300_000);
    assert!(tracer.names_kept() <= 2 * MAX);
    gil.set_event_hook(None).unwrap();
    let trace = tracer.finish();
    assert_eq!(trace.dropped, 0, "the ring kept every event of the test");
    let names: Vec<(usize, String)> = trace.rows().into_iter().map(|r| (r.token.get(), r.name)).collect();
    assert_eq!(
        names,
        [
            (1, "named early".to_string()),
            (2, "first life".to_string()),
            (2, "second life".to_string()),
            (3, "rename 999".to_string()),
        ]
    );
}

/// A fresh directory for one test's files.
fn test_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gil-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A session on `path` titled `title` with `events` events recorded.
fn session_with(path: &std::path::Path, title: &str, events: usize) -> gil_core::trace::TraceSession {
    let session = gil_core::trace::TraceSession::create(path, 0).unwrap();
    session.tracer().set_title(title);
    for i in 0..events {
        let kind = if i % 2 == 0 {
            EventKind::Acquired
        } else {
            EventKind::Released(ReleaseReason::Voluntary)
        };
        session
            .tracer()
            .record(&gil_core::Event::now(kind, tok(1 + i % 7), None));
    }
    session
}

/// The title of the one whole trace in `path`; panics if the file is not
/// exactly one whole trace of its format.
fn whole_trace_title(path: &std::path::Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    match TraceFormat::from_path(path).unwrap() {
        TraceFormat::ChromeJson => {
            let doc: serde_json::Value = serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("not one whole JSON trace ({} bytes): {e}", bytes.len()));
            doc["otherData"]["title"].as_str().unwrap().to_string()
        }
        TraceFormat::Svg => {
            let text = String::from_utf8(bytes).expect("UTF-8");
            let doc = roxmltree::Document::parse(&text)
                .unwrap_or_else(|e| panic!("not one whole SVG trace ({} bytes): {e}", text.len()));
            let title = doc.descendants().find(|n| n.has_tag_name("text")).expect("a title");
            title.text().unwrap().to_string()
        }
    }
}

/// Files in `dir` other than `keep`: temporary files left behind.
fn leftovers(dir: &std::path::Path, keep: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != keep)
        .collect()
}

#[test]
fn a_trace_started_on_a_path_being_traced_never_mixes_into_its_file() {
    let dir = test_dir("same-path");
    for name in ["t.json", "t.svg"] {
        let path = dir.join(name);
        let long = session_with(&path, "long", 20_000);
        // A second trace on the same path, started while the first runs
        // (before: it emptied the file the first one was to write).
        let short = session_with(&path, "short", 4);
        long.finish().unwrap();
        assert_eq!(whole_trace_title(&path), "long", "{name}");
        // Before: written from the start of a file holding the long
        // trace, over its beginning only.
        short.finish().unwrap();
        assert_eq!(whole_trace_title(&path), "short", "{name}");
        assert_eq!(leftovers(&dir, name), Vec::<String>::new());
        std::fs::remove_file(&path).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// POSIX-only: on Windows two traces renamed over one name at the same
/// moment may fail (the name is being replaced; seen under Wine as an
/// intermittent error), which POSIX's rename never does.
#[test]
#[cfg(unix)]
fn a_trace_started_while_another_is_written_to_its_path_leaves_one_whole_trace() {
    let dir = test_dir("racing-path");
    let path = dir.join("t.json");
    for _ in 0..3 {
        let long = session_with(&path, "long", 20_000);
        let writer = thread::spawn(move || long.finish().unwrap());
        // Once the long trace is being written (into the file, or into a
        // temporary one beside it), a short one is started on the path and
        // written too, while the long one may still be.
        let writing = || {
            std::fs::metadata(&path).is_ok_and(|m| m.len() > 0)
                || leftovers(&dir, "t.json").iter().any(|n| n.ends_with(".tmp"))
        };
        while !writer.is_finished() && !writing() {
            thread::yield_now();
        }
        session_with(&path, "short", 4).finish().unwrap();
        assert_eq!(writer.join().unwrap(), 20_000);
        let title = whole_trace_title(&path);
        assert!(title == "long" || title == "short", "{title}");
        assert_eq!(leftovers(&dir, "t.json"), Vec::<String>::new());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_trace_file_that_cannot_be_written_fails_at_the_start_and_an_old_one_stays_until_the_end() {
    use gil_core::trace::TraceSession;
    let dir = test_dir("unwritable");
    // A directory where the file should be: refused at the start.
    let taken = dir.join("taken.json");
    std::fs::create_dir(&taken).unwrap();
    assert!(TraceSession::create(&taken, 0).is_err());
    // An existing file is left as it is until the trace is written.
    let path = dir.join("t.json");
    std::fs::write(&path, "before").unwrap();
    let session = session_with(&path, "after", 10);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "before");
    // A directory gone by the end: the write fails, nothing is left.
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(session.finish().is_err());
    assert!(!dir.exists());
}

/// A fresh, empty directory for one test.
#[cfg(unix)]
fn fresh_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gil-names-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts a trace session on `path` in a thread of its own, so that a
/// start that blocks (opening a FIFO for writing waits for a reader) fails
/// the test instead of hanging it; the start's result.
#[cfg(unix)]
fn start_session(path: &std::path::Path) -> std::io::Result<gil_core::trace::TraceSession> {
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = path.to_path_buf();
    thread::spawn(move || {
        let _ = tx.send(gil_core::trace::TraceSession::create(&owned, 0));
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("starting a trace on {} blocked", path.display()))
}

/// Asserts that a trace on `name` is refused at the start and at the
/// write, with `GIL_ERR_IO`'s kind (not an invalid name) and a message
/// saying what `name` is.
#[cfg(unix)]
fn assert_trace_refused(name: &std::path::Path, what: &str) {
    let err = start_session(name).expect_err("a trace session on a name that is not a regular file");
    assert_ne!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains(what), "{err}");
    let (trace, _) = traced_run(GilConfig::new(), 2);
    let err = trace
        .write_to(name, TraceFormat::ChromeJson)
        .expect_err("a trace written to a name that is not a regular file");
    assert!(err.to_string().contains(what), "{err}");
}

#[cfg(unix)]
#[test]
fn a_trace_never_writes_through_a_link_to_a_file_outside_its_directory() {
    let dir = fresh_dir("outside");
    let elsewhere = fresh_dir("outside-target");
    let target = elsewhere.join("precious.json");
    std::fs::write(&target, "precious").unwrap();
    let link = dir.join("t.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert_trace_refused(&link, "a symbolic link");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
    assert!(link.is_symlink(), "the link is left in place");
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        1,
        "nothing made beside the target"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&elsewhere).unwrap();
}

#[cfg(unix)]
#[test]
fn a_trace_never_replaces_a_device_node_or_a_link_to_one() {
    use std::os::unix::fs::FileTypeExt;
    let dir = fresh_dir("device");
    let node = dir.join("null-copy");
    let c = std::ffi::CString::new(node.as_os_str().as_encoded_bytes()).unwrap();
    // A private node with /dev/null's numbers (1, 3): the test touches no
    // device of the machine's.
    // SAFETY: `c` is a NUL-terminated path.
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) } != 0 {
        let e = std::io::Error::last_os_error();
        eprintln!("skipped: mknod needs CAP_MKNOD ({e}); CI runs as root");
        std::fs::remove_dir_all(&dir).unwrap();
        return;
    }
    let link = dir.join("t.json");
    std::os::unix::fs::symlink(&node, &link).unwrap();
    assert_trace_refused(&link, "a symbolic link");
    let named = dir.join("named.json");
    std::fs::rename(&node, &named).unwrap();
    assert_trace_refused(&named, "a device");
    let kind = std::fs::symlink_metadata(&named).unwrap().file_type();
    assert!(kind.is_char_device(), "the node is still a device");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(unix)]
#[test]
fn a_trace_refuses_a_link_another_user_owns_in_a_sticky_directory() {
    use std::os::unix::fs::PermissionsExt;
    let dir = fresh_dir("sticky");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let elsewhere = fresh_dir("sticky-target");
    let target = elsewhere.join("etc-anything");
    std::fs::write(&target, "config").unwrap();
    let link = dir.join("gil-1234.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    // As root (CI), the link belongs to another user, as one planted in
    // /tmp would; otherwise it is the test's own.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let c = std::ffi::CString::new(link.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is a NUL-terminated path.
        assert_eq!(unsafe { libc::lchown(c.as_ptr(), 65534, 65534) }, 0);
    }
    assert_trace_refused(&link, "a symbolic link");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "config");
    assert!(link.is_symlink());
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&elsewhere).unwrap();
}

#[cfg(unix)]
#[test]
fn a_trace_refuses_a_fifo_without_opening_it() {
    use std::os::unix::fs::FileTypeExt;
    let dir = fresh_dir("fifo");
    let fifo = dir.join("t.json");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    assert_trace_refused(&fifo, "a FIFO");
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(unix)]
#[test]
fn a_link_put_at_the_name_during_a_trace_is_not_followed_at_its_end() {
    let dir = fresh_dir("swap");
    let elsewhere = fresh_dir("swap-target");
    let target = elsewhere.join("precious");
    std::fs::write(&target, "precious").unwrap();
    let name = dir.join("t.json");
    let session = start_session(&name).unwrap();
    // The name holds nothing while the trace runs: a link is put there.
    std::os::unix::fs::symlink(&target, &name).unwrap();
    let err = session.finish().expect_err("the name became a link");
    assert!(err.to_string().contains("a symbolic link"), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
    assert!(name.is_symlink());
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "no temporary file left: {leftovers:?}");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&elsewhere).unwrap();
}

#[cfg(unix)]
#[test]
fn a_trace_replaces_a_regular_file_and_keeps_its_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = fresh_dir("regular");
    let name = dir.join("t.json");
    std::fs::write(&name, "old").unwrap();
    std::fs::set_permissions(&name, std::fs::Permissions::from_mode(0o640)).unwrap();
    let session = start_session(&name).unwrap();
    assert_eq!(
        std::fs::read_to_string(&name).unwrap(),
        "old",
        "left as it is until the end"
    );
    session.finish().unwrap();
    assert!(std::fs::read_to_string(&name).unwrap().contains("traceEvents"));
    let mode = std::fs::metadata(&name).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_grammar_accepts_exactly_the_trace_names_a_session_can_start() {
    use gil_core::trace::TraceSession;
    use gil_core::Options;
    let dir = std::env::temp_dir().join(format!("gil-grammar-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in [
        "t.json",
        ".json",
        ".svg",
        "t.SVG",
        "..json",
        "t.json.txt",
        "t.jsonl",
        "json",
        "a b.svg",
        "%%.json",
        "x.Json",
    ] {
        let path = dir.join(name);
        let text = format!("priority,trace={}", path.display());
        let parsed = text.parse::<Options>();
        let started = TraceSession::create(&path, 0);
        assert_eq!(
            parsed.is_ok(),
            started.is_ok(),
            "{name}: the grammar says {:?}, a session {:?}",
            parsed.err().map(|e| e.to_string()),
            started.err()
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_ended_thread_is_drawn_ended_not_as_one_not_seen_yet() {
    let gil = Gil::new(GilConfig::new()).unwrap();
    let tracer = Tracer::new(Tracer::DEFAULT_MAX_EVENTS);
    gil.set_event_hook(Some(tracer.hook())).unwrap();
    hold(&gil, 1, ReleaseReason::Final); // ends early
    gil.acquire(tok(2)).unwrap();
    thread::sleep(Duration::from_millis(5));
    gil.release(tok(2), ReleaseReason::Voluntary).unwrap();
    gil.set_event_hook(None).unwrap();
    let trace = tracer.finish();
    let rows = trace.rows();
    assert_eq!(rows.len(), 2);
    let ended = rows[0].ended_ns.expect("token 1 made its final release");
    assert!(ended < trace.end_ns);
    assert_eq!(rows[1].ended_ns, None, "token 2 is still alive");
    let mut out = Vec::new();
    trace.write_svg(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    let ended_rects: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some("url(#ended)"))
        .collect();
    // The legend's swatch, and row 1's time after its end; none in row 2.
    assert_eq!(ended_rects.len(), 2, "{text}");
    let ys: Vec<&str> = ended_rects.iter().map(|n| n.attribute("y").unwrap()).collect();
    assert_eq!(ys[0], "52", "the legend");
    assert_ne!(ys[1], "52");
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    assert!(texts.contains(&"ended"), "the legend names the mark");
    assert!(text.contains(r#"<pattern id="ended""#));
}
