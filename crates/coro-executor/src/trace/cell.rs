//! [`TraceCell`]: where a layer above keeps a task's root frame, parent and published stack.

use super::*;

/// The trace storage a layer above embeds in a task's future and [`attach`]es, with the task's
/// root frame: where snapshots find the task's name, its parent and its most recently published
/// stack.
///
/// Three words, as it is in every task: the published stack, which only tasks that suspend
/// need, is allocated at the first publication, and the root frame is the one the task's future
/// has anyway. (A larger cell made small roots larger than the compiler copies without a
/// `memcpy` call.)
///
/// ```
/// use coro_executor::trace::TraceCell;
///
/// let cell = TraceCell::new();
/// assert!(!cell.is_attached());
/// ```
pub struct TraceCell {
    /// The task's outermost frame, inside its future; null until [`attach`].
    pub(super) root: AtomicPtr<Frame>,
    /// Task ids start at 1, so the niche keeps this at 8 bytes.
    pub(super) parent: Option<NonZeroU64>,
    /// Null until the first publication; [`ROOT_ONLY`] while every publication so far was of
    /// the root frame alone (nothing to copy: snapshots read that frame from the task itself);
    /// then set once to a box, freed with the cell.
    pub(super) published: PublishedPtr,
}

/// The model's pointer (`trace/loom_publish.rs` checks a publication against a snapshot).
pub(super) type PublishedPtr = crate::loom::sync::atomic::AtomicPtr<Published>;

/// The bit of [`TraceCell::parent`] that says the parent awaits the task (ids never reach it).
pub(super) const AWAITED_BY_PARENT: u64 = 1 << 63;

/// [`TraceCell::published`]: the stack is the root frame alone. Never the address of a box
/// (no allocation lives at the lowest aligned address).
pub(super) const ROOT_ONLY: *mut Published = ptr::dangling_mut();

/// A task's most recently published stack, innermost frame first, and its fingerprint.
pub(super) struct Published {
    pub(super) frames: Mutex<Vec<Frame>>,
    pub(super) fingerprint: AtomicU64,
}

impl TraceCell {
    /// A cell like [`new`](Self::new)'s (defined in `publish.rs`, beside the running task it reads), whose parent in snapshots is `parent` instead of the
    /// task running on this thread: for a task spawned on behalf of another one (a helper that
    /// a helper spawns for the same collect belongs under the collect's task). Task ids start
    /// at 1, so `Some(0)` means no parent, as `None` does.
    ///
    /// ```
    /// # use coro_executor::trace::{Frame, TaskSnapshot, TraceCell};
    /// # use coro_executor::trace::{attach, current_task_id, snapshot_tasks};
    /// # fn snapshot_with(cell: TraceCell) -> TaskSnapshot {
    /// #     let traced = Box::new((cell, Frame::new("task", std::panic::Location::caller())));
    /// #     let ex = coro_executor::ManualExecutor::new();
    /// #     let join = ex.handle().spawn(std::future::poll_fn(move |_| {
    /// #         // SAFETY: the closure owns the box until the future is dropped; it never moves.
    /// #         unsafe { attach(&traced.0, &traced.1) };
    /// #         let me = current_task_id();
    /// #         let task = snapshot_tasks().into_iter().find(|t| Some(t.id()) == me).unwrap();
    /// #         std::task::Poll::Ready(task)
    /// #     }));
    /// #     ex.run_until_idle();
    /// #     futures::executor::block_on(join).unwrap()
    /// # }
    /// // `snapshot_with` runs a task that attaches the cell, and returns the task's snapshot.
    /// assert_eq!(snapshot_with(TraceCell::with_parent(Some(7))).parent_id(), Some(7));
    /// assert_eq!(snapshot_with(TraceCell::with_parent(Some(0))).parent_id(), None);
    /// ```
    #[inline]
    pub fn with_parent(parent: Option<u64>) -> Self {
        TraceCell {
            root: AtomicPtr::new(ptr::null_mut()),
            parent: parent.and_then(NonZeroU64::new),
            published: PublishedPtr::new(ptr::null_mut()),
        }
    }

    /// A cell whose parent in snapshots is `parent`, which also *awaits* this task where it
    /// waits (a collect's child driven by a task of its own): a dump continues this task's stack
    /// into its parent's ([`TaskSnapshot::awaited_by_parent`]).
    ///
    /// ```
    /// # use coro_executor::trace::{Frame, TaskSnapshot, TraceCell};
    /// # use coro_executor::trace::{attach, current_task_id, snapshot_tasks};
    /// # fn snapshot_with(cell: TraceCell) -> TaskSnapshot {
    /// #     let traced = Box::new((cell, Frame::new("task", std::panic::Location::caller())));
    /// #     let ex = coro_executor::ManualExecutor::new();
    /// #     let join = ex.handle().spawn(std::future::poll_fn(move |_| {
    /// #         // SAFETY: the closure owns the box until the future is dropped; it never moves.
    /// #         unsafe { attach(&traced.0, &traced.1) };
    /// #         let me = current_task_id();
    /// #         let task = snapshot_tasks().into_iter().find(|t| Some(t.id()) == me).unwrap();
    /// #         std::task::Poll::Ready(task)
    /// #     }));
    /// #     ex.run_until_idle();
    /// #     futures::executor::block_on(join).unwrap()
    /// # }
    /// // `snapshot_with` runs a task that attaches the cell, and returns the task's snapshot.
    /// let task = snapshot_with(TraceCell::awaited_by(Some(7)));
    /// assert_eq!(task.parent_id(), Some(7));
    /// assert!(task.awaited_by_parent());
    /// ```
    #[inline]
    pub fn awaited_by(parent: Option<u64>) -> Self {
        TraceCell {
            root: AtomicPtr::new(ptr::null_mut()),
            // Ids start at 1: 0 (no parent) stays no parent, without the mark.
            parent: parent
                .filter(|&p| p != 0)
                .and_then(|p| NonZeroU64::new(p | AWAITED_BY_PARENT)),
            published: PublishedPtr::new(ptr::null_mut()),
        }
    }

    /// Whether [`attach`] has attached this cell to a task.
    ///
    /// ```
    /// assert!(!coro_executor::trace::TraceCell::new().is_attached());
    /// ```
    #[inline]
    pub fn is_attached(&self) -> bool {
        !self.root.load(Relaxed).is_null()
    }

    /// Publishes `frames()` unless `fingerprint` says it is the stack already published. Only
    /// the thread polling the task calls this.
    pub(super) fn publish(
        &self,
        alone: bool,
        fingerprint: fn() -> u64,
        frames: fn() -> Vec<Frame>,
    ) {
        let current = self.published.load(Relaxed);
        if current.is_null() || current == ROOT_ONLY {
            if alone {
                // The common case of a spawned future waiting on something that is not a Task:
                // nothing to copy and nothing to allocate. Release: pairs with a snapshot's
                // Acquire, as for a box.
                if current.is_null() {
                    self.published.store(ROOT_ONLY, Release);
                }
                return;
            }
            let published = Box::new(Published {
                frames: Mutex::new(frames()),
                fingerprint: AtomicU64::new(fingerprint()),
            });
            // Release: a snapshot that sees the box sees its contents.
            self.published.store(Box::into_raw(published), Release);
        } else {
            // SAFETY: any other non-null value is a box this cell owns until it is dropped.
            let published = unsafe { &*current };
            let fingerprint = fingerprint();
            if published.fingerprint.load(Relaxed) != fingerprint {
                published.store(fingerprint, frames());
            }
        }
    }
}

impl Published {
    #[inline(never)]
    fn store(&self, fingerprint: u64, frames: Vec<Frame>) {
        *self.frames.lock().unwrap() = frames;
        self.fingerprint.store(fingerprint, Relaxed);
    }
}

impl Drop for TraceCell {
    #[inline]
    fn drop(&mut self) {
        // A load rather than `get_mut`, which the models' pointer lacks; nothing races a drop.
        let published = self.published.load(Relaxed);
        if !published.is_null() && published != ROOT_ONLY {
            free_published(published);
        }
    }
}

/// Frees a published stack: out of line, as a task that never suspended has none.
#[inline(never)]
fn free_published(published: *mut Published) {
    // SAFETY: `published` was leaked by `TraceCell::publish` and is freed only here, by the
    // cell's drop. No snapshot reads it any more: the cell is dropped with its task's future,
    // after the task left its list (see `TaskHeader::snapshot`).
    drop(unsafe { Box::from_raw(published) });
}

impl fmt::Debug for TraceCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceCell")
            .field("attached", &self.is_attached())
            .field("parent", &self.parent)
            .finish_non_exhaustive()
    }
}

/// A cell owned by its task's header, with its own copy of the root frame (the frame it was
/// given may not outlive the task's future). `cell` first, so a pointer to it is one to the
/// whole (`repr(C)`).
#[repr(C)]
pub(crate) struct OwnedCell {
    pub(crate) cell: TraceCell,
    pub(crate) root: Frame,
}
