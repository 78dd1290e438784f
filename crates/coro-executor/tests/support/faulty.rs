//! Shared by the callback-panic tests of coro-executor and coro (the latter includes this file
//! by path): `Faulty`, a waker whose `clone`, `wake` or `drop` panics on demand, and
//! `reported_with`, which counts the panics the panic hook has seen.

// Each test binary uses its own subset.
#![allow(dead_code)]

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{RawWaker, RawWakerVTable, Waker};

/// A waker whose clone, wake or drop panics on demand (with `"{message}: clone"` and so on);
/// its wakes are first passed on to `forward` if set (a user waker wrapping coro's). Every
/// waker made from it holds a reference, so `live()` says how many are alive.
pub struct Faulty {
    pub message: &'static str,
    pub clone_panics: AtomicBool,
    pub wake_panics: AtomicBool,
    pub drop_panics: AtomicBool,
    pub wakes: AtomicUsize,
    pub forward: std::sync::Mutex<Option<Waker>>,
}

impl Faulty {
    pub fn new(message: &'static str) -> Arc<Faulty> {
        Arc::new(Faulty {
            message,
            clone_panics: AtomicBool::new(false),
            wake_panics: AtomicBool::new(false),
            drop_panics: AtomicBool::new(false),
            wakes: AtomicUsize::new(0),
            forward: std::sync::Mutex::new(None),
        })
    }

    pub fn panicking_on(message: &'static str, flag: fn(&Faulty) -> &AtomicBool) -> Arc<Faulty> {
        let faulty = Faulty::new(message);
        flag(&faulty).store(true, SeqCst);
        faulty
    }

    pub fn waker(self: &Arc<Self>) -> Waker {
        let data = Arc::into_raw(self.clone()).cast::<()>();
        // SAFETY: `data` is an `Arc<Faulty>` reference owned by the new waker, which is what
        // every function of `VTABLE` expects.
        unsafe { Waker::from_raw(RawWaker::new(data, &VTABLE)) }
    }

    pub fn live(self: &Arc<Self>) -> usize {
        Arc::strong_count(self) - 1
    }

    pub fn on_wake(&self) {
        self.wakes.fetch_add(1, SeqCst);
        let forward = self.forward.lock().unwrap().clone();
        if let Some(waker) = forward {
            waker.wake();
        }
        if self.wake_panics.load(SeqCst) {
            panic!("{}: wake", self.message);
        }
    }
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone_raw, wake_raw, wake_by_ref_raw, drop_raw);

fn release(faulty: Arc<Faulty>) {
    let (panics, message) = (faulty.drop_panics.load(SeqCst), faulty.message);
    drop(faulty);
    if panics {
        panic!("{message}: drop");
    }
}

unsafe fn clone_raw(data: *const ()) -> RawWaker {
    // SAFETY: `data` is a live waker's `Arc<Faulty>` reference.
    let faulty = unsafe { &*data.cast::<Faulty>() };
    if faulty.clone_panics.load(SeqCst) {
        panic!("{}: clone", faulty.message);
    }
    // SAFETY: `data` is a live waker's `Arc<Faulty>` reference, so the count is at least one
    // and the `Arc` alive; the new waker owns the count taken here.
    unsafe { Arc::increment_strong_count(data.cast::<Faulty>()) };
    RawWaker::new(data, &VTABLE)
}

unsafe fn wake_raw(data: *const ()) {
    // SAFETY: waking by value consumes the waker's reference.
    let faulty = unsafe { Arc::from_raw(data.cast::<Faulty>()) };
    let woken = catch_unwind(AssertUnwindSafe(|| faulty.on_wake()));
    release(faulty);
    if let Err(payload) = woken {
        resume_unwind(payload);
    }
}

unsafe fn wake_by_ref_raw(data: *const ()) {
    // SAFETY: `data` is a live waker's `Arc<Faulty>` reference.
    unsafe { &*data.cast::<Faulty>() }.on_wake();
}

unsafe fn drop_raw(data: *const ()) {
    // SAFETY: dropping the waker gives up its reference.
    release(unsafe { Arc::from_raw(data.cast::<Faulty>()) });
}

/// How many times the panic hook has seen the message `text`. The counting hook is installed
/// once for the whole binary, after `install_first` (a hook it chains to; nothing replaces it
/// afterwards), so tests running in parallel do not disturb each other: each looks for its own
/// messages only.
pub fn reported_with(text: &str, install_first: impl FnOnce()) -> usize {
    static SEEN: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(|| {
        install_first();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(seen) = SEEN.get() {
                let payload = info.payload();
                let text = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                seen.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(text);
            }
            previous(info);
        }));
        Mutex::new(Vec::new())
    });
    let seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
    seen.iter().filter(|m| m.as_str() == text).count()
}
