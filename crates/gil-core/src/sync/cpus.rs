//! Whether a waiter's spin can help: only while the thread it waits for
//! can run beside it. With one CPU to share, the spinner holds the CPU the
//! holder needs to let go of the lock, and every microsecond it spins is
//! one the holder waits.
//!
//! What counts is what the process may use *now*, not when the lock was
//! made: an affinity narrowed later (`sched_setaffinity`, `taskset -p`,
//! `os.sched_setaffinity`, a cpuset change) or a container's CPU quota.
//! So the answer is re-read at a bounded rate, on the waiting paths only:
//!
//! - the calling thread's CPU affinity (`sched_getaffinity`, about half a
//!   microsecond), per thread, at most every [`AFFINITY_EVERY`];
//! - on Linux, the CPU quota of the process's cgroup and its ancestors
//!   (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`):
//!   when a lock that spins is made, then at most every [`QUOTA_EVERY`],
//!   by a thread that was just made to let go of the lock (a forced
//!   release, after the switch), never on a waiter's way to the lock:
//!   reading cgroup files takes about 0.1 ms here. Where the files are is
//!   found once, from `/proc/self/cgroup` and `/proc/self/mountinfo`.
//!
//! A thread spins only if its affinity holds two CPUs or more and no quota
//! allows one CPU or less. Elsewhere than Linux the count is
//! `std::thread::available_parallelism`, re-read at the same rate. Under
//! loom every wait may spin: the model has no CPUs.
#![cfg_attr(
    any(gil_loom, not(target_os = "linux")),
    allow(dead_code, reason = "cgroups are Linux's, and loom has no CPUs")
)]

#[cfg(not(gil_loom))]
use std::cell::Cell;
#[cfg(not(gil_loom))]
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
#[cfg(not(gil_loom))]
use std::sync::OnceLock;
use std::time::Duration;
#[cfg(not(gil_loom))]
use std::time::Instant;

/// How often a thread re-reads its CPU affinity, at most.
pub(crate) const AFFINITY_EVERY: Duration = Duration::from_millis(10);

/// How often the process re-reads its cgroup's CPU quota, at most.
pub(crate) const QUOTA_EVERY: Duration = Duration::from_secs(1);

/// Whether spinning can help the calling thread now (re-read if the last
/// answer is older than the bounds above). For the waiting paths.
#[cfg(not(gil_loom))]
pub(crate) fn spinning_helps() -> bool {
    let now = nanos_since_start();
    let affinity_ok = THREAD.with(|t| {
        let (next, ok) = t.get();
        if now < next {
            return ok;
        }
        let ok = usable_cpus() > 1;
        t.set((now + AFFINITY_EVERY.as_nanos() as u64, ok));
        ok
    });
    affinity_ok && QUOTA_OK.load(Relaxed)
}

/// Re-reads the process's CPU quota if it was last read [`QUOTA_EVERY`]
/// ago or more (or `now`), by the first thread to come here once it is
/// due. Reads files: with the thread's cancellation disabled.
#[cfg(not(gil_loom))]
pub(crate) fn refresh_quota(now: bool) {
    let at = nanos_since_start();
    let next = QUOTA_NEXT.load(Relaxed);
    if (now || at >= next)
        && QUOTA_NEXT
            .compare_exchange(next, at + QUOTA_EVERY.as_nanos() as u64, Relaxed, Relaxed)
            .is_ok()
    {
        let _no_cancel = crate::cancel::NoCancel::new();
        QUOTA_OK.store(quota_cpus().is_none_or(|cpus| cpus > 1.0), Relaxed);
    }
}

/// Under loom: nothing to read.
#[cfg(gil_loom)]
pub(crate) fn refresh_quota(_now: bool) {}

/// Under loom: always (see the module docs).
#[cfg(gil_loom)]
pub(crate) fn spinning_helps() -> bool {
    true
}

#[cfg(not(gil_loom))]
thread_local! {
    /// (when to re-read, in [`nanos_since_start`]; the last answer).
    static THREAD: Cell<(u64, bool)> = const { Cell::new((0, true)) };
}

/// When the process's quota is read next, in [`nanos_since_start`].
#[cfg(not(gil_loom))]
static QUOTA_NEXT: AtomicU64 = AtomicU64::new(0);
/// Whether the quota, as last read, allows more than one CPU.
#[cfg(not(gil_loom))]
static QUOTA_OK: AtomicBool = AtomicBool::new(true);

/// Nanoseconds since the first call in this process (monotonic).
#[cfg(not(gil_loom))]
fn nanos_since_start() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// The CPUs the calling thread may run on.
#[cfg(all(not(gil_loom), target_os = "linux"))]
fn usable_cpus() -> usize {
    // SAFETY: an all-zero cpu_set_t is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable for `size_of::<cpu_set_t>()` bytes; 0 is
    // the calling thread.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        // More CPUs than a cpu_set_t holds (EINVAL): more than one.
        return usize::MAX;
    }
    // SAFETY: `set` was filled by sched_getaffinity.
    usize::try_from(unsafe { libc::CPU_COUNT(&set) }).unwrap_or(usize::MAX)
}

/// The CPUs the process may run on.
#[cfg(all(not(gil_loom), not(target_os = "linux")))]
fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(usize::MAX, |n| n.get())
}

/// The smallest CPU quota, in CPUs, of the process's cgroup and its
/// ancestors; `None` without one.
#[cfg(all(not(gil_loom), target_os = "linux"))]
fn quota_cpus() -> Option<f64> {
    static FILES: OnceLock<Vec<QuotaFile>> = OnceLock::new();
    let files = FILES.get_or_init(|| {
        let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        quota_files(&cgroup, &mountinfo)
    });
    files.iter().filter_map(QuotaFile::read).min_by(f64::total_cmp)
}

/// Elsewhere the count of [`usable_cpus`] includes any quota std knows of.
#[cfg(all(not(gil_loom), not(target_os = "linux")))]
fn quota_cpus() -> Option<f64> {
    None
}

/// A file that can hold a CPU quota (Linux cgroups).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum QuotaFile {
    /// cgroup v2: `DIR/cpu.max`, `QUOTA PERIOD` or `max PERIOD`.
    V2(std::path::PathBuf),
    /// cgroup v1: `DIR/cpu.cfs_quota_us` (-1: none) and
    /// `DIR/cpu.cfs_period_us`.
    V1(std::path::PathBuf),
}

impl QuotaFile {
    /// The quota in CPUs, `None` without one (or unreadable).
    fn read(&self) -> Option<f64> {
        let read = |dir: &std::path::Path, name: &str| std::fs::read_to_string(dir.join(name)).ok();
        match self {
            QuotaFile::V2(dir) => parse_cpu_max(&read(dir, "cpu.max")?),
            QuotaFile::V1(dir) => parse_cfs(&read(dir, "cpu.cfs_quota_us")?, &read(dir, "cpu.cfs_period_us")?),
        }
    }
}

/// A cgroup v2 `cpu.max`, in CPUs: `None` for `max` (no quota).
pub(crate) fn parse_cpu_max(text: &str) -> Option<f64> {
    let mut fields = text.split_whitespace();
    let quota: f64 = fields.next()?.parse().ok()?;
    let period: f64 = fields.next()?.parse().ok()?;
    (period > 0.0).then(|| quota / period)
}

/// cgroup v1's `cpu.cfs_quota_us` and `cpu.cfs_period_us`, in CPUs:
/// `None` for a quota of -1 (none).
pub(crate) fn parse_cfs(quota: &str, period: &str) -> Option<f64> {
    let quota: i64 = quota.trim().parse().ok()?;
    let period: i64 = period.trim().parse().ok()?;
    (quota > 0 && period > 0).then(|| quota as f64 / period as f64)
}

/// The files that may hold the CPU quotas of a process, from its
/// `/proc/self/cgroup` and `/proc/self/mountinfo`: its cgroup's directory
/// under each mounted hierarchy with the `cpu` controller (v1) or the
/// unified one (v2), and every ancestor up to the mount's root.
pub(crate) fn quota_files(cgroup: &str, mountinfo: &str) -> Vec<QuotaFile> {
    let mut files = Vec::new();
    for line in cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let v2 = id == "0" && controllers.is_empty();
        if !v2 && !controllers.split(',').any(|c| c == "cpu") {
            continue;
        }
        for mount in mountinfo.lines() {
            let Some((root, point)) = cpu_mount(mount, v2) else {
                continue;
            };
            // The process's cgroup relative to what is mounted there.
            let Some(rel) = path.strip_prefix(root) else {
                continue;
            };
            let mut dir = std::path::PathBuf::from(point);
            dir.extend(rel.split('/').filter(|c| !c.is_empty()));
            loop {
                files.push(if v2 {
                    QuotaFile::V2(dir.clone())
                } else {
                    QuotaFile::V1(dir.clone())
                });
                if dir.as_os_str() == point || !dir.pop() {
                    break;
                }
            }
        }
    }
    files
}

/// From one `/proc/self/mountinfo` line: (root, mount point) of a cgroup2
/// mount (`v2`) or of a cgroup v1 mount with the `cpu` controller.
fn cpu_mount(line: &str, v2: bool) -> Option<(&str, &str)> {
    let fields: Vec<&str> = line.split(' ').collect();
    let root = *fields.get(3)?;
    let point = *fields.get(4)?;
    let dash = fields.iter().position(|f| *f == "-")?;
    let fstype = *fields.get(dash + 1)?;
    let options = *fields.get(dash + 3)?;
    let matches = if v2 {
        fstype == "cgroup2"
    } else {
        fstype == "cgroup" && options.split(',').any(|o| o == "cpu")
    };
    matches.then_some((root, point))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn a_cpu_max_of_max_is_no_quota() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("50000 100000\n"), Some(0.5));
        assert_eq!(parse_cpu_max("250000 100000"), Some(2.5));
        assert_eq!(parse_cpu_max(""), None);
        assert_eq!(parse_cfs("-1\n", "100000\n"), None);
        assert_eq!(parse_cfs("100000\n", "100000\n"), Some(1.0));
    }

    #[test]
    fn quota_files_follow_the_cgroup_up_to_its_mount() {
        let cgroup = "0::/user.slice/app.scope\n";
        let mountinfo = "31 23 0:28 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n";
        let dir = |p: &str| QuotaFile::V2(PathBuf::from(p));
        assert_eq!(
            quota_files(cgroup, mountinfo),
            vec![
                dir("/sys/fs/cgroup/user.slice/app.scope"),
                dir("/sys/fs/cgroup/user.slice"),
                dir("/sys/fs/cgroup")
            ]
        );
    }

    #[test]
    fn quota_files_of_cgroup_v1_need_the_cpu_controller() {
        // Hybrid (this kind of machine): v1 controllers, an empty v2 tree.
        let cgroup = "4:memory:/job\n2:cpuacct:/\n1:cpu,cpuacct:/job/7\n0::/\n";
        let mountinfo = "\
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
33 31 0:30 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        let v1 = |p: &str| QuotaFile::V1(PathBuf::from(p));
        assert_eq!(
            quota_files(cgroup, mountinfo),
            vec![
                v1("/sys/fs/cgroup/cpu,cpuacct/job/7"),
                v1("/sys/fs/cgroup/cpu,cpuacct/job"),
                v1("/sys/fs/cgroup/cpu,cpuacct"),
                QuotaFile::V2(PathBuf::from("/sys/fs/cgroup/unified")),
            ]
        );
    }

    #[test]
    fn a_container_sees_its_cgroup_from_its_mount_root() {
        // The cgroup namespace's root is mounted: the path is relative to it.
        let cgroup = "0::/docker/abc\n";
        let mountinfo = "100 90 0:40 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
        assert_eq!(
            quota_files(cgroup, mountinfo),
            vec![QuotaFile::V2(PathBuf::from("/sys/fs/cgroup"))]
        );
    }

    #[test]
    fn the_quota_read_is_the_smallest_of_the_ancestors() {
        let root = std::env::temp_dir().join(format!("gil-quota-{}", std::process::id()));
        let leaf = root.join("a/b");
        std::fs::create_dir_all(&leaf).unwrap();
        std::fs::write(root.join("a/cpu.max"), "80000 100000\n").unwrap();
        std::fs::write(leaf.join("cpu.max"), "max 100000\n").unwrap();
        let files = [
            QuotaFile::V2(leaf),
            QuotaFile::V2(root.join("a")),
            QuotaFile::V2(root.clone()),
        ];
        let smallest = files.iter().filter_map(QuotaFile::read).min_by(f64::total_cmp);
        assert_eq!(smallest, Some(0.8));
        std::fs::remove_dir_all(root).unwrap();
    }
}
