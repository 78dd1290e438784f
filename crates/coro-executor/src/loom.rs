//! One switch between `std` and `loom` for every synchronisation primitive in this crate.
//!
//! Concurrency code imports `crate::loom::...` instead of `std::sync::...`, so that the models
//! built with `RUSTFLAGS="--cfg loom"` explore the same code that ships. `UnsafeCell` is wrapped
//! so that both builds use loom's closure-based access API.

// The shim offers the full set, whichever subset the crate uses at the moment.
#![allow(unused_imports, dead_code)]

#[cfg(not(loom))]
mod imp {
    pub(crate) mod sync {
        pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};

        pub(crate) mod atomic {
            pub(crate) use std::sync::atomic::{
                AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
            };
        }
    }

    pub(crate) mod thread {
        pub(crate) use std::thread::{JoinHandle, Thread, current, spawn, yield_now};
    }

    pub(crate) use std::thread_local;

    /// `std::cell::UnsafeCell` with loom's access API.
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }

    /// A hint inside spin loops; loom needs an explicit yield instead.
    #[inline(always)]
    pub(crate) fn spin_loop() {
        std::hint::spin_loop();
    }
}

#[cfg(loom)]
mod imp {
    pub(crate) mod sync {
        pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};

        pub(crate) mod atomic {
            pub(crate) use loom::sync::atomic::{
                AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
            };
        }
    }

    pub(crate) mod thread {
        pub(crate) use loom::thread::{JoinHandle, Thread, current, spawn, yield_now};
    }

    pub(crate) use loom::thread_local;

    pub(crate) use loom::cell::UnsafeCell;

    pub(crate) fn spin_loop() {
        loom::thread::yield_now();
    }
}

pub(crate) use imp::*;
