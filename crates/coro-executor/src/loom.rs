//! One switch between `std` and `loom` for every synchronisation primitive in this crate.
//!
//! Concurrency code imports `crate::loom::...` (the `coro` crate: `coro_executor::loom::...`)
//! instead of `std::sync::...`, so that the models
//! built with `RUSTFLAGS="--cfg loom"` explore the same code that ships. `UnsafeCell` is wrapped
//! so that both builds use loom's closure-based access API.

// The shim offers the full set, whichever subset the crate uses at the moment.
#![allow(unused_imports, dead_code)]

#[cfg(not(loom))]
mod imp {
    pub mod sync {
        pub use std::sync::{Arc, Condvar, Mutex, MutexGuard};

        pub mod atomic {
            pub use std::sync::atomic::{
                AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
            };
        }
    }

    pub mod thread {
        pub use std::thread::{JoinHandle, Thread, ThreadId, current, spawn, yield_now};
    }

    pub use std::thread_local;

    /// `std::cell::UnsafeCell` with loom's access API.
    #[derive(Debug)]
    pub struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        #[inline(always)]
        pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        #[inline(always)]
        pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }

    /// A hint inside spin loops; loom needs an explicit yield instead.
    #[inline(always)]
    pub fn spin_loop() {
        std::hint::spin_loop();
    }
}

#[cfg(loom)]
mod imp {
    pub mod sync {
        pub use loom::sync::{Arc, Condvar, Mutex, MutexGuard};

        pub mod atomic {
            pub use loom::sync::atomic::{
                AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
            };
        }
    }

    pub mod thread {
        pub use loom::thread::{JoinHandle, Thread, ThreadId, current, spawn, yield_now};
    }

    pub use loom::thread_local;

    pub use loom::cell::UnsafeCell;

    pub fn spin_loop() {
        loom::thread::yield_now();
    }
}

pub use imp::*;
