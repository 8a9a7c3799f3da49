//! Windows' slim reader/writer lock and condition variable (SRWLOCK +
//! CONDITION_VARIABLE), the primitives CPython's GIL is built on there
//! (`Python/condvar.h`), behind the same small API as `pthread/`.
//!
//! A timed wait (`SleepConditionVariableSRW`) counts whole milliseconds on
//! the system's interrupt time, which setting the wall clock does not
//! move; a timeout is rounded up to the next millisecond, and the
//! monotonic clock decides when the wait has timed out
//! (`super::time::wait_until`). Both objects are a pointer-sized word that
//! may move while unused, so they live inline. There is no thread
//! cancellation to keep out (`crate::cancel` does nothing here).
//!
//! A library thread ([`spawn_detached`]) holds a reference to the module
//! its code is in (`gil.dll`, or the program the library is linked into)
//! from before it starts until it ends: a program may `FreeLibrary` the
//! DLL while one runs, and the DLL stays mapped until the thread is gone.

pub(crate) use super::time::{spin_while, Clock, Stamp};
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize};

use super::time::{unlocked, wait_until};
use super::Clocked;
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::io;
use std::ops::{Deref, DerefMut};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};
use windows_sys::Win32::Foundation::{CloseHandle, FreeLibrary, GetLastError, ERROR_TIMEOUT, HMODULE};
use windows_sys::Win32::System::LibraryLoader::{
    FreeLibraryAndExitThread, GetModuleHandleExW, GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS,
};
use windows_sys::Win32::System::Threading::{
    AcquireSRWLockExclusive, CreateThread, GetCurrentThread, ReleaseSRWLockExclusive, SetThreadDescription,
    SleepConditionVariableSRW, TryAcquireSRWLockExclusive, WakeAllConditionVariable, WakeConditionVariable,
    CONDITION_VARIABLE, CONDITION_VARIABLE_INIT, INFINITE, SRWLOCK, SRWLOCK_INIT, STACK_SIZE_PARAM_IS_A_RESERVATION,
};

/// A mutual-exclusion lock around a `T` (no poisoning: a panic while it is
/// held unlocks it and leaves `T` as it was).
pub(crate) struct Mutex<T> {
    raw: UnsafeCell<SRWLOCK>,
    value: UnsafeCell<T>,
}

// SAFETY: the mutex hands out `&mut T` to one thread at a time, so sending
// or sharing it is sound whenever `T` itself may move between threads.
unsafe impl<T: Send> Send for Mutex<T> {}
// SAFETY: as above; `T` is only reached through a guard.
unsafe impl<T: Send> Sync for Mutex<T> {}

/// Proof that the calling thread holds a [`Mutex`]; unlocks on drop.
pub(crate) struct MutexGuard<'a, T> {
    mutex: &'a Mutex<T>,
}

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex {
            raw: UnsafeCell::new(SRWLOCK_INIT),
            value: UnsafeCell::new(value),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        // SAFETY: `raw` is an initialised SRWLOCK that does not move while
        // borrowed; it is not recursive and no caller locks it twice (the
        // guard is the only way to hold it, and the lock never re-enters).
        unsafe { AcquireSRWLockExclusive(self.raw.get()) };
        MutexGuard { mutex: self }
    }

    /// Locks, but while another thread holds the mutex tries again for up
    /// to `limit` before sleeping (see `pthread::Mutex::lock_spinning`).
    fn lock_spinning(&self, limit: Duration) -> MutexGuard<'_, T> {
        let start = Instant::now();
        loop {
            // SAFETY: as in `lock`; a failed try leaves the lock as it was.
            if unsafe { TryAcquireSRWLockExclusive(self.raw.get()) } {
                return MutexGuard { mutex: self };
            }
            if start.elapsed() >= limit {
                return self.lock();
            }
            for _ in 0..32 {
                std::hint::spin_loop();
            }
        }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the guard exists, so this thread holds the lock.
        unsafe { ReleaseSRWLockExclusive(self.mutex.raw.get()) };
    }
}

impl<T> MutexGuard<'_, T> {
    /// Runs `f` with the mutex unlocked, then locks it again as
    /// `Mutex::lock_spinning` does with `limit`, also if `f` unwinds (see
    /// `pthread::MutexGuard::unlocked_spinning`).
    pub(crate) fn unlocked_spinning<R>(guard: &mut Self, limit: Duration, f: impl FnOnce() -> R) -> R {
        let mutex = guard.mutex;
        // A second guard for the lock `guard` holds, dropped, unlocks; a
        // new lock's guard, forgotten, leaves `guard` standing for it.
        unlocked(
            || drop(MutexGuard { mutex }),
            || std::mem::forget(mutex.lock_spinning(limit)),
            f,
        )
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this thread holds the mutex, so nobody writes `value`.
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this thread holds the mutex, and `&mut self` makes this
        // the only reference through the guard.
        unsafe { &mut *self.mutex.value.get() }
    }
}

/// A condition variable whose timed waits end by the monotonic clock.
pub(crate) struct Condvar {
    raw: UnsafeCell<CONDITION_VARIABLE>,
}

// SAFETY: condition variables are made to be shared between threads.
unsafe impl Send for Condvar {}
// SAFETY: as above.
unsafe impl Sync for Condvar {}

impl Condvar {
    pub(crate) fn new() -> Self {
        Condvar {
            raw: UnsafeCell::new(CONDITION_VARIABLE_INIT),
        }
    }

    /// Blocks until notified (or a spurious wake-up).
    pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        // SAFETY: the guard proves this thread holds `guard.mutex`
        // (exclusively, flags 0), which the call releases and takes back
        // before returning.
        let ok = unsafe { SleepConditionVariableSRW(self.raw.get(), guard.mutex.raw.get(), INFINITE, 0) };
        debug_assert!(ok != 0, "SleepConditionVariableSRW failed");
    }

    /// Blocks until notified or `timeout` (at least 1 µs) has passed, for
    /// data that carries a [`Clock`]; `true` on timeout.
    pub(crate) fn wait_for<T: Clocked>(&self, guard: &mut MutexGuard<'_, T>, timeout: Duration) -> bool {
        self.wait_timeout(guard, timeout.max(Duration::from_micros(1)))
    }

    /// Blocks until notified or `timeout` has passed on the monotonic
    /// clock; `true` on timeout.
    pub(crate) fn wait_timeout<T>(&self, guard: &mut MutexGuard<'_, T>, timeout: Duration) -> bool {
        let (cond, lock) = (self.raw.get(), guard.mutex.raw.get());
        wait_until(timeout, |left| {
            // SAFETY: as in `wait`.
            let ok = unsafe { SleepConditionVariableSRW(cond, lock, millis(left), 0) };
            // SAFETY: reads this thread's last error; no preconditions.
            ok == 0 && unsafe { GetLastError() } == ERROR_TIMEOUT
        })
    }

    pub(crate) fn notify_one(&self) {
        // SAFETY: an initialised condition variable that does not move
        // while borrowed.
        unsafe { WakeConditionVariable(self.raw.get()) };
    }

    pub(crate) fn notify_all(&self) {
        // SAFETY: as in `notify_one`.
        unsafe { WakeAllConditionVariable(self.raw.get()) };
    }
}

/// `d` in whole milliseconds, rounded up (a wait never ends before `d`),
/// below `INFINITE`.
fn millis(d: Duration) -> u32 {
    let ms = d.as_nanos().div_ceil(1_000_000);
    u32::try_from(ms).unwrap_or(INFINITE - 1).min(INFINITE - 1)
}

/// What a library thread runs, and the reference to the module that keeps
/// its code mapped meanwhile.
struct Detached {
    module: HMODULE,
    name: Vec<u16>,
    body: Box<dyn FnOnce() + Send>,
}

/// Starts a thread named `name` that runs `body` and is never joined. The
/// module `body`'s code is in cannot be unloaded before the thread has
/// ended: the thread holds a reference to it (taken here, before the
/// thread exists, so a `FreeLibrary` right after this returns cannot win
/// the race) and lets it go with `FreeLibraryAndExitThread`, which ends
/// the thread without returning into the module. A `std::thread` would
/// return into the DLL's copy of std after `body`, and whatever let go of
/// the reference there would be code in the module it may unmap.
pub(crate) fn spawn_detached(name: &str, body: impl FnOnce() + Send + 'static) -> io::Result<()> {
    let mut module: HMODULE = std::ptr::null_mut();
    // SAFETY: with FROM_ADDRESS the name is an address inside the module
    // wanted (this function's own code); `module` is writable. The call
    // adds one to the module's reference count, given back by the thread.
    let found = unsafe {
        GetModuleHandleExW(
            GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS,
            thread_start as *const u16,
            &mut module,
        )
    };
    if found == 0 {
        return Err(io::Error::last_os_error());
    }
    let detached = Box::into_raw(Box::new(Detached {
        module,
        name: name.encode_utf16().chain(Some(0)).collect(),
        body: Box::new(body),
    }));
    // 2 MiB of address space reserved, as std's threads have.
    let stack = 2 << 20;
    // SAFETY: `thread_start` takes the `Detached` box it is given; the
    // thread's handle is closed below (the thread runs on without it).
    let handle = unsafe {
        CreateThread(
            std::ptr::null(),
            stack,
            Some(thread_start),
            detached.cast::<c_void>(),
            STACK_SIZE_PARAM_IS_A_RESERVATION,
            std::ptr::null_mut(),
        )
    };
    if handle.is_null() {
        let error = io::Error::last_os_error();
        // SAFETY: no thread took it: the box and the reference are still
        // this function's to give back.
        unsafe {
            drop(Box::from_raw(detached));
            FreeLibrary(module);
        }
        return Err(error);
    }
    // SAFETY: a handle CreateThread returned, closed once.
    unsafe { CloseHandle(handle) };
    Ok(())
}

/// A library thread's start: runs its body, drops everything it owns,
/// then gives back the module's reference and ends in one call.
unsafe extern "system" fn thread_start(param: *mut c_void) -> u32 {
    // SAFETY: `spawn_detached` passes a `Detached` box, to this thread only.
    let Detached { module, name, body } = *unsafe { Box::from_raw(param.cast::<Detached>()) };
    // SAFETY: a NUL-terminated UTF-16 name, for this thread (a name is
    // only for debuggers: a failure changes nothing).
    unsafe { SetThreadDescription(GetCurrentThread(), name.as_ptr()) };
    drop(name);
    // As a std thread's, a panic ends the thread (std has printed it);
    // unwinding out of this function would abort the process.
    let _ = catch_unwind(AssertUnwindSafe(body));
    // SAFETY: the reference `spawn_detached` took for this thread; nothing
    // of the module runs after it (the call does not return).
    unsafe { FreeLibraryAndExitThread(module, 0) }
}
