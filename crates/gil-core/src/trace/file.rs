//! Trace files: written whole or not at all.
//!
//! A trace is written to a temporary file beside its path and renamed over
//! it once complete, so a reader (or a second trace started on the same
//! path while the first is being written) never sees half a trace: the
//! path holds what it held before, then a whole trace. Only a regular file
//! (or nothing) at the name given is replaced: the temporary file is made
//! with `O_EXCL | O_NOFOLLOW` in that name's directory and renamed over the
//! name, so a symbolic link there is refused, never followed, and the
//! kernel's rules for sticky directories apply. The file I/O runs
//! under [`NoCancel`]: `open`, `write` and `close` are cancellation points,
//! and a thread's pending `pthread_cancel` acted on there would unwind
//! through the library's frames (see [`crate::cancel`]).

use std::ffi::OsString;
use std::fs::{self, File, FileType, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::cancel::NoCancel;

/// Fails now, with the error a write at the end would meet, if `path`
/// cannot be written: refuses a name that holds anything but a regular file
/// (a symbolic link, a FIFO, a device, a directory), has the system judge a
/// missing name ([`probe_missing`]), and creates and removes a file beside
/// it, as [`write_whole`] will. An existing file is left as it is, and a
/// missing one stays missing: the name holds nothing new until the trace
/// is written whole, so a process that dies before leaves no empty file.
pub(super) fn check_writable(path: &Path) -> io::Result<()> {
    let _no_cancel = NoCancel::new();
    match fs::symlink_metadata(path) {
        Ok(meta) => check_regular(path, meta.file_type())?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => probe_missing(path)?,
        Err(e) => return Err(e),
    }
    let (temp, file) = create_temp(path)?;
    drop(file);
    // Best effort: the probe is empty and hidden.
    let _ = fs::remove_file(temp);
    Ok(())
}

/// Writes `path` whole with `write`: into a new file in the same
/// directory, renamed over `path` once written. `path` must name a regular
/// file or nothing: anything else there is refused, and a symbolic link is
/// never followed (one put there between the check and the rename is
/// replaced itself, its target untouched). On an error `path` is left as
/// it was and the temporary file is removed.
pub(super) fn write_whole(path: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let _no_cancel = NoCancel::new();
    let existing = match fs::symlink_metadata(path) {
        Ok(meta) => {
            check_regular(path, meta.file_type())?;
            Some(meta)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let (temp, file) = create_temp(path)?;
    let written = (|| {
        // The trace replaces the file: it keeps the file's permissions.
        if let Some(meta) = existing {
            file.set_permissions(meta.permissions())?;
        }
        let mut out = BufWriter::new(file);
        write(&mut out)?;
        out.into_inner().map_err(io::IntoInnerError::into_error)?;
        fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

/// `Ok` if `kind` (what `path` names, not followed) is a regular file; an
/// error saying what it is otherwise.
fn check_regular(path: &Path, kind: FileType) -> io::Result<()> {
    if kind.is_file() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "'{}' is {}: a trace replaces only a regular file, or creates a missing one",
        path.display(),
        describe(kind)
    )))
}

/// What a file of type `kind` is, in words.
fn describe(kind: FileType) -> &'static str {
    if kind.is_symlink() {
        return "a symbolic link";
    }
    if kind.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

/// Has the system judge `path`, a name that holds nothing, without leaving
/// anything there, even if the process dies meanwhile.
///
/// On POSIX systems nothing is asked here: a name is any bytes but `/` and
/// NUL, and a file system that refuses some (vfat's `EINVAL`) refuses them
/// in the temporary file beside it too, whose name holds this one. Windows
/// also refuses whole names, devices in every directory (`NUL.json`,
/// `COM1.json`), that no file can be renamed to: the name is created with
/// `FILE_FLAG_DELETE_ON_CLOSE`, so the system removes it when the handle
/// closes, or when the process ends however it ends.
#[cfg(not(windows))]
fn probe_missing(_path: &Path) -> io::Result<()> {
    Ok(())
}

/// See the POSIX version above.
#[cfg(windows)]
fn probe_missing(path: &Path) -> io::Result<()> {
    use std::os::windows::fs::OpenOptionsExt;
    use windows_sys::Win32::Storage::FileSystem::{DELETE, FILE_FLAG_DELETE_ON_CLOSE, FILE_GENERIC_WRITE};
    let probe = OpenOptions::new()
        .write(true)
        .create_new(true)
        .access_mode(FILE_GENERIC_WRITE | DELETE)
        .custom_flags(FILE_FLAG_DELETE_ON_CLOSE)
        .open(path);
    match probe {
        Ok(_) => Ok(()),
        // Made meanwhile by someone else: what it is decides.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            check_regular(path, fs::symlink_metadata(path)?.file_type())
        }
        Err(e) => Err(e),
    }
}

/// Creates `path` for writing, failing if anything is there already (a
/// dangling link too): `O_CREAT | O_EXCL | O_NOFOLLOW`.
fn create_exclusive(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    options.open(path)
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
        match create_exclusive(&temp) {
            // Left by a process with the same pid that died writing: skip it.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 100 => continue,
            file => return Ok((temp, file?)),
        }
    }
}
