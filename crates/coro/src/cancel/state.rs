//! The shared state behind a cancellation source and its tokens.
//!
//! One flag says "cancellation requested"; a short mutex guards the list of reactions (callbacks
//! and wakers of `cancelled()` futures). Requesting cancellation sets the flag, then takes the
//! reactions off the list one at a time and runs each *outside* the lock, noting which one runs
//! and on which thread: a registration dropped on another thread meanwhile waits for its callback
//! to return, while one dropped from inside its own callback (same thread) does not deadlock
//! (folly's CancellationState protocol).
//!
//! A merged token's state has no sources of its own: it is cancelled by callbacks registered on
//! its inputs, which it owns; whether it can still be cancelled is asked of those inputs.

use coro_loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use coro_loom::sync::{Condvar, Mutex};
use coro_loom::thread::{self, ThreadId};
use std::sync::Arc;
use std::task::Waker;

/// A registered reaction to cancellation.
pub(crate) enum Reaction {
    /// A `CancellationCallback`'s closure.
    Callback(Box<dyn FnOnce() + Send>),
    /// A `cancelled()` future's waker.
    Wake(Waker),
}

/// A callback registered on a state, deregistered when dropped (waiting for the callback if
/// it is running on another thread, see `CancelState::deregister`): what a
/// `CancellationCallback` holds, and what a merged state keeps on each of its inputs.
pub(crate) struct Registration {
    state: Arc<CancelState>,
    key: Key,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.state.deregister(self.key);
    }
}

/// Identifies one registration: slot index plus the slot's generation, so that a stale key
/// (its reaction already ran and the slot was reused) matches nothing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Key {
    index: u32,
    generation: u32,
}

struct Slot {
    generation: u32,
    reaction: Option<Reaction>,
}

#[derive(Default)]
struct Registry {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// The reaction running right now (outside the lock), with its thread.
    running: Option<(Key, ThreadId)>,
    /// For merged tokens: the callbacks on the inputs that forward their cancellation here.
    forwarders: Vec<Registration>,
    /// For merged tokens: the inputs' states, asked by `can_be_cancelled`.
    inputs: Vec<Arc<CancelState>>,
}

impl Registry {
    fn release(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index);
    }

    /// Takes the first live reaction at or after `from`, for `request` to run. No reaction is
    /// registered once cancellation is requested, so one forward pass drains them all.
    fn take_from(&mut self, from: usize) -> Option<(Key, Reaction)> {
        let found = self.slots[from.min(self.slots.len())..]
            .iter()
            .position(|s| s.reaction.is_some());
        let index = from + found?;
        let slot = &mut self.slots[index];
        let key = Key {
            index: index as u32,
            generation: slot.generation,
        };
        Some((key, slot.reaction.take().expect("found live")))
    }
}

pub(crate) struct CancelState {
    requested: AtomicBool,
    /// Live `CancellationSource`s. A merged state has none and defers to its inputs.
    sources: AtomicUsize,
    merged: bool,
    registry: Mutex<Registry>,
    /// Signalled when a running reaction finishes, for a deregistration waiting on it.
    done: Condvar,
}

impl CancelState {
    pub(crate) fn new_source() -> Arc<CancelState> {
        Self::new(1, false)
    }

    pub(crate) fn new_merged() -> Arc<CancelState> {
        Self::new(0, true)
    }

    fn new(sources: usize, merged: bool) -> Arc<CancelState> {
        Arc::new(CancelState {
            requested: AtomicBool::new(false),
            sources: AtomicUsize::new(sources),
            merged,
            registry: Mutex::new(Registry::default()),
            done: Condvar::new(),
        })
    }

    pub(crate) fn is_cancellation_requested(&self) -> bool {
        self.requested.load(Acquire)
    }

    pub(crate) fn can_be_cancelled(&self) -> bool {
        if self.is_cancellation_requested() {
            return true;
        }
        if self.merged {
            let inputs = self.registry.lock().unwrap().inputs.clone();
            return inputs.iter().any(|t| t.can_be_cancelled());
        }
        self.sources.load(Acquire) > 0
    }

    pub(crate) fn add_source(&self) {
        self.sources.fetch_add(1, Relaxed);
    }

    pub(crate) fn remove_source(&self) {
        self.sources.fetch_sub(1, AcqRel);
    }

    /// Makes a merged state listen to `inputs` (called once, right after `new_merged`).
    pub(crate) fn set_inputs(&self, inputs: Vec<Arc<CancelState>>, forwarders: Vec<Registration>) {
        let mut registry = self.registry.lock().unwrap();
        registry.inputs = inputs;
        if self.is_cancellation_requested() {
            // An input fired while the forwarders were being registered: they are not needed.
            drop(registry);
            drop(forwarders);
        } else {
            registry.forwarders = forwarders;
        }
    }

    /// Registers `callback`, or runs it now (and returns `None`) if cancellation was already
    /// requested.
    pub(crate) fn register_callback(
        self: &Arc<Self>,
        callback: impl FnOnce() + Send + 'static,
    ) -> Option<Registration> {
        match self.register(Reaction::Callback(Box::new(callback))) {
            Ok(key) => Some(Registration {
                state: self.clone(),
                key,
            }),
            Err(Reaction::Callback(callback)) => {
                callback();
                None
            }
            Err(Reaction::Wake(_)) => unreachable!("registered a callback"),
        }
    }

    /// Registers `reaction`. Returns `Err(reaction)`, unregistered, if cancellation was already
    /// requested: the caller then runs it at once.
    pub(crate) fn register(&self, reaction: Reaction) -> Result<Key, Reaction> {
        let mut registry = self.registry.lock().unwrap();
        // Checked under the lock: `request` sets the flag before it takes the lock to drain, so
        // either it finds this entry or we see the flag.
        if self.is_cancellation_requested() {
            return Err(reaction);
        }
        let index = match registry.free.pop() {
            Some(index) => index,
            None => {
                registry.slots.push(Slot {
                    generation: 0,
                    reaction: None,
                });
                (registry.slots.len() - 1) as u32
            }
        };
        let slot = &mut registry.slots[index as usize];
        slot.reaction = Some(reaction);
        Ok(Key {
            index,
            generation: slot.generation,
        })
    }

    /// Replaces the waker of a registered `Wake` reaction. Returns false if it was already
    /// taken (cancellation is under way or done).
    ///
    /// The new waker is cloned, and the old one dropped, outside the lock: both are user code,
    /// and a panic under the lock would poison it for every later user of the token.
    pub(crate) fn update_waker(&self, key: Key, waker: &Waker) -> bool {
        let is_current = |registry: &mut Registry| match registry.slots.get_mut(key.index as usize)
        {
            Some(Slot {
                generation,
                reaction: Some(Reaction::Wake(old)),
            }) if *generation == key.generation => Some(old.will_wake(waker)),
            _ => None,
        };
        match is_current(&mut self.registry.lock().unwrap()) {
            None => return false,
            Some(true) => return true,
            Some(false) => {}
        }
        let mut new = waker.clone();
        let mut registry = self.registry.lock().unwrap();
        // Looked up again: cancellation may have taken the reaction meanwhile.
        let taken = match registry.slots.get_mut(key.index as usize) {
            Some(Slot {
                generation,
                reaction: Some(Reaction::Wake(old)),
            }) if *generation == key.generation => {
                std::mem::swap(old, &mut new);
                false
            }
            _ => true,
        };
        drop(registry);
        drop(new);
        !taken
    }

    /// Removes a registration. If its callback is running on another thread right now, waits
    /// until it has returned; if it is running on this thread (a callback dropping its own
    /// registration), returns at once.
    pub(crate) fn deregister(&self, key: Key) {
        let mut registry = self.registry.lock().unwrap();
        let slot = &mut registry.slots[key.index as usize];
        if slot.generation == key.generation {
            if let Some(reaction) = slot.reaction.take() {
                registry.release(key.index);
                drop(registry);
                // Dropped outside the lock: a closure's captures may do anything on drop.
                drop(reaction);
                return;
            }
        }
        let me = thread::current().id();
        while matches!(registry.running, Some((k, t)) if k == key && t != me) {
            registry = self.done.wait(registry).unwrap();
        }
    }

    /// Requests cancellation. Returns true for the call that did it, which runs every reaction
    /// once, on this thread, outside the lock. If callbacks panic, all still run and the first
    /// panic is resumed afterwards.
    pub(crate) fn request(&self) -> bool {
        if self.requested.swap(true, AcqRel) {
            return false;
        }
        let me = thread::current().id();
        let mut first_panic = None;
        let mut registry = self.registry.lock().unwrap();
        let mut cursor = 0;
        while let Some((key, reaction)) = registry.take_from(cursor) {
            cursor = key.index as usize + 1;
            registry.running = Some((key, me));
            drop(registry);
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match reaction {
                    Reaction::Callback(f) => f(),
                    Reaction::Wake(waker) => waker.wake(),
                }));
            if let Err(payload) = outcome {
                first_panic.get_or_insert(payload);
            }
            registry = self.registry.lock().unwrap();
            registry.running = None;
            registry.release(key.index);
            self.done.notify_all();
        }
        // Forwarders are not needed once cancelled; dropping them releases the inputs.
        let forwarders = std::mem::take(&mut registry.forwarders);
        drop(registry);
        drop(forwarders);
        if let Some(payload) = first_panic {
            std::panic::resume_unwind(payload);
        }
        true
    }
}
