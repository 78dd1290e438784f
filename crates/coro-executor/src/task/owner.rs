//! A task's reference to its executor, held in its header without naming the executor's type,
//! so that this layer imports nothing above it.
//!
//! Erased through a thin pointer and a release function stored in the executor's state (its
//! first field), rather than an `Arc<dyn Trait>`: the header stays one word smaller (a fat
//! pointer would add 8 bytes to every task), and the schedule path reads the executor's state
//! through a plain cast, as it did when the field was typed. Measured when it was erased
//! (callgrind, `benches/examples/tracing_instructions.rs` on a pool worker, per operation):
//! spawn 2210.5 -> 2209.9 instructions, yield 499.9 -> 501.7, the header still 40 bytes; so it
//! is erased rather than kept typed with an import of the pool. Only a pool makes these today.

use std::ptr::NonNull;

/// The first field of an executor state that tasks may point at (the state is `#[repr(C)]`, so
/// a pointer to it is a pointer to this).
pub(crate) struct OwnerHead {
    /// Releases the counted reference that an [`OwnerRef`] to this state holds.
    release: unsafe fn(NonNull<OwnerHead>),
}

impl OwnerHead {
    /// # Safety
    /// `release` must give back a reference made by the `OwnerRef::from_raw` of the state this
    /// head is the first field of (see there).
    pub(crate) const unsafe fn new(release: unsafe fn(NonNull<OwnerHead>)) -> OwnerHead {
        OwnerHead { release }
    }
}

/// One counted reference to an executor's state, released when dropped.
pub(crate) struct OwnerRef(NonNull<OwnerHead>);

// SAFETY: an `OwnerRef` is a counted reference (an `Arc`'s, in practice) to a state that is
// `Send + Sync` (required of every `from_raw` caller); sending it sends that reference.
unsafe impl Send for OwnerRef {}
// SAFETY: a shared `OwnerRef` only reads its pointer, to a state that is `Send + Sync`
// (required of every `from_raw` caller).
unsafe impl Sync for OwnerRef {}

impl OwnerRef {
    /// # Safety
    /// `head` points at the `OwnerHead` first field of a `Send + Sync` state, and carries one
    /// counted reference to that state (as `Arc::into_raw` gives), which the head's release
    /// function gives back when this is dropped.
    pub(crate) unsafe fn from_raw(head: NonNull<OwnerHead>) -> OwnerRef {
        OwnerRef(head)
    }

    /// The state's address, for the executor that made this to cast back to its own type.
    #[inline]
    pub(crate) fn as_ptr(&self) -> *const OwnerHead {
        self.0.as_ptr()
    }
}

impl Drop for OwnerRef {
    fn drop(&mut self) {
        // SAFETY: the pointer carries one counted reference (see `from_raw`), which this gives
        // back once; the state is alive until then, so its head can be read.
        unsafe { (self.0.as_ref().release)(self.0) }
    }
}
