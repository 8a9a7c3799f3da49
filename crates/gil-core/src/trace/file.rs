//! Trace files: written whole or not at all.
//!
//! A trace is written to a temporary file beside its path and renamed over
//! it once complete, so a reader (or a second trace started on the same
//! path while the first is being written) never sees half a trace: the
//! path holds what it held before, then a whole trace. The file I/O runs
//! under [`NoCancel`]: `open`, `write` and `close` are cancellation points,
//! and a thread's pending `pthread_cancel` acted on there would unwind
//! through the library's frames (see [`crate::cancel`]).

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::cancel::NoCancel;

/// Fails now, with the error a write at the end would meet, if `path`
/// cannot be written: opens it for writing (creating it, empty, if it does
/// not exist; an existing file is left as it is) and creates and removes a
/// file beside it, as [`write_whole`] will.
pub(super) fn check_writable(path: &Path) -> io::Result<()> {
    let _no_cancel = NoCancel::new();
    OpenOptions::new().write(true).create(true).truncate(false).open(path)?;
    let (temp, file) = create_temp(&target(path))?;
    drop(file);
    // Best effort: the probe is empty and hidden.
    let _ = fs::remove_file(temp);
    Ok(())
}

/// Writes `path` whole with `write`: into a new file in the same
/// directory, renamed over `path` once written. On an error `path` is left
/// as it was and the temporary file is removed.
pub(super) fn write_whole(path: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let _no_cancel = NoCancel::new();
    let path = target(path);
    let (temp, file) = create_temp(&path)?;
    let written = (|| {
        // The trace replaces the file: it keeps the file's permissions.
        if let Ok(meta) = fs::metadata(&path) {
            if meta.is_file() {
                file.set_permissions(meta.permissions())?;
            }
        }
        let mut out = BufWriter::new(file);
        write(&mut out)?;
        out.into_inner().map_err(io::IntoInnerError::into_error)?;
        fs::rename(&temp, &path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

/// The file a write to `path` replaces: a symbolic link's target (written
/// through, as opening the link would), or `path` itself.
fn target(path: &Path) -> PathBuf {
    if path.is_symlink() {
        if let Ok(resolved) = fs::canonicalize(path) {
            return resolved;
        }
    }
    path.to_path_buf()
}

/// A new file beside `path`, named `.NAME.PID.N.tmp` (hidden, unique in
/// this process and among processes).
fn create_temp(path: &Path) -> io::Result<(PathBuf, File)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a trace file path names a file"))?;
    let mut tries = 0;
    loop {
        tries += 1;
        let mut temp = OsString::from(".");
        temp.push(name);
        temp.push(format!(".{}.{}.tmp", std::process::id(), NEXT.fetch_add(1, Relaxed)));
        let temp = path.with_file_name(temp);
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            // Left by a process with the same pid that died writing: skip it.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 100 => continue,
            file => return Ok((temp, file?)),
        }
    }
}
