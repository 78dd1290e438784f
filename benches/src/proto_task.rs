//! A hand-written raw task with the contract coro's engine uses from async-task (one allocation
//! per task; a [`Runnable`] that runs it, a [`Waker`] that reschedules it, a [`JoinHandle`] that
//! takes its output or cancels it on drop; metadata and a schedule function stored in the task),
//! to measure what such a task could save over async-task (`benches/task_alloc.rs`).
//!
//! Rule: a prototype for measurement only, not used by coro. The engine allocates its tasks with
//! async-task; nothing outside the `task_alloc` bench and this module's tests calls this code.
//!
//! Layout: one allocation holds the header (state word, vtable pointer, awaiter slot,
//! metadata), the schedule function and a union of the future and its output.
//!
//! The state word is async-task's: flags in the low byte, the count of [`Runnable`]s and
//! [`Waker`]s above it; the [`JoinHandle`] is a flag (`HANDLE`), not a count. The task is freed
//! when the count is zero and the handle is gone. Where it differs from async-task, and why it
//! may be cheaper:
//! - a run marks itself running with one `fetch_add` (a runnable exists only while the task is
//!   scheduled and not running, so `SCHEDULED -> RUNNING` is an addition) instead of a load and
//!   a compare-exchange;
//! - a run that ends (pending or finished) drops the runnable's reference in the same
//!   compare-exchange that clears `RUNNING`, unless it must touch the task after it (an awaiter
//!   to wake, an output nobody will take), instead of a second read-modify-write;
//! - a finished task whose handle is already gone drops the output before it would store it;
//! - the handle takes the output and lets go of the task in one compare-exchange (async-task:
//!   one to take the output, then a load and two more in the handle's drop);
//! - a task nobody can wake any more (last waker dropped, handle gone, neither scheduled nor
//!   running) or whose handle is dropped while it is idle has its future dropped in place, on
//!   that thread, rather than scheduled once more to be dropped by the executor (every future
//!   here is `Send`);
//! - the output slot is `T`, not `Result<T, panic payload>`, and there is no `propagate_panic`
//!   flag: 16 bytes less per task for small futures.
//!
//! Panics: a panic in the future's `poll` unwinds out of [`Runnable::run`] (async-task's default,
//! `propagate_panic` off). On the way out the task is closed, its future dropped (once) and the
//! runnable's reference released; the handle then resolves `None`, and the allocation is freed
//! exactly once, by whoever lets go of it last. A panic in the destructor of the future, of the
//! output (when the task drops it), of the metadata or of the schedule function, or in an
//! awaiter's `wake`, aborts the process, as in async-task: at those points the task's state has
//! already moved on, and unwinding would leave it half released.
//!
//! ```
//! use coro_benches::proto_task::{self, Runnable, ScheduleInfo};
//! use std::sync::{Arc, Mutex};
//!
//! let queue = Arc::new(Mutex::new(Vec::<Runnable<u32>>::new()));
//! let q = queue.clone();
//! let (runnable, handle) = proto_task::spawn(
//!     async { 6 * 7 },
//!     move |r: Runnable<u32>, _: ScheduleInfo| q.lock().unwrap().push(r),
//!     5,
//! );
//! runnable.schedule();
//! let runnable = queue.lock().unwrap().pop().unwrap();
//! assert_eq!(*runnable.metadata(), 5);
//! runnable.run();
//! assert_eq!(futures::executor::block_on(handle), Some(42));
//! ```

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::cell::UnsafeCell;
use std::future::Future;
use std::marker::PhantomData;
use std::mem::{self, ManuallyDrop};
use std::pin::Pin;
use std::ptr::{self, NonNull, addr_of_mut};
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

/// A runnable for the task exists (queued or about to be).
const SCHEDULED: usize = 1 << 0;
/// The future is being polled.
const RUNNING: usize = 1 << 1;
/// The future finished; its output is in the task until the handle takes it.
const COMPLETED: usize = 1 << 2;
/// Cancelled, or the output was taken or dropped: the task is never polled again.
const CLOSED: usize = 1 << 3;
/// The [`JoinHandle`] exists.
const HANDLE: usize = 1 << 4;
/// The awaiter slot holds the handle's waker.
const AWAITER: usize = 1 << 5;
/// The handle is writing the awaiter slot.
const REGISTERING: usize = 1 << 6;
/// Someone is taking the awaiter out of its slot.
const NOTIFYING: usize = 1 << 7;
/// One [`Runnable`] or [`Waker`].
const REFERENCE: usize = 1 << 8;
/// The bits of the reference count.
const REFS: usize = !(REFERENCE - 1);
/// A task just spawned: its first runnable and its handle.
const FRESH: usize = SCHEDULED | HANDLE | REFERENCE;

/// How the schedule function learns why it was called.
///
/// ```
/// use coro_benches::proto_task::ScheduleInfo;
/// let info = ScheduleInfo { woken_while_running: true };
/// assert!(info.woken_while_running);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScheduleInfo {
    /// The task was woken while it was being polled, and is rescheduled as its run ends.
    pub woken_while_running: bool,
}

/// What a task does with its [`Runnable`] when it is woken: any
/// `Fn(Runnable<M>, ScheduleInfo) + Send + Sync + 'static` (zero-sized if it captures nothing).
///
/// ```
/// use coro_benches::proto_task::{Runnable, Schedule, ScheduleInfo};
/// fn assert_schedule<S: Schedule<()>>(_: &S) {}
/// let schedule = |r: Runnable<()>, _: ScheduleInfo| drop(r);
/// assert_schedule(&schedule);
/// assert_eq!(std::mem::size_of_val(&schedule), 0);
/// ```
pub trait Schedule<M>: Send + Sync + 'static {
    /// Queues `runnable` to be run (or drops it, which cancels the task).
    fn schedule(&self, runnable: Runnable<M>, info: ScheduleInfo);
}

impl<M, F> Schedule<M> for F
where
    F: Fn(Runnable<M>, ScheduleInfo) + Send + Sync + 'static,
{
    #[inline]
    fn schedule(&self, runnable: Runnable<M>, info: ScheduleInfo) {
        self(runnable, info)
    }
}

/// The operations that depend on the task's future, output and schedule function types.
struct TaskVTable {
    schedule: unsafe fn(NonNull<()>, ScheduleInfo),
    run: unsafe fn(NonNull<()>) -> bool,
    drop_future: unsafe fn(NonNull<()>),
    output: unsafe fn(NonNull<()>) -> *mut (),
    destroy: unsafe fn(NonNull<()>),
    clone_waker: unsafe fn(*const ()) -> RawWaker,
}

/// The start of every task's allocation: what the type-erased handles reach.
#[repr(C)]
struct Header<M> {
    state: AtomicUsize,
    vtable: &'static TaskVTable,
    /// The handle's waker; written under `REGISTERING`, taken under `NOTIFYING`.
    awaiter: UnsafeCell<Option<Waker>>,
    metadata: M,
}

/// The future until it finishes, then its output (until the handle takes it).
union Stage<F, T> {
    future: ManuallyDrop<F>,
    output: ManuallyDrop<T>,
}

/// The whole allocation.
#[repr(C)]
struct Cell<F, T, S, M> {
    header: Header<M>,
    schedule: S,
    stage: UnsafeCell<Stage<F, T>>,
}

/// Aborts the process if dropped: armed around code that must not unwind.
struct AbortOnPanic;

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        std::process::abort();
    }
}

/// Runs `f`, aborting if it panics.
#[inline]
fn abort_on_panic<R>(f: impl FnOnce() -> R) -> R {
    let bomb = AbortOnPanic;
    let result = f();
    mem::forget(bomb);
    result
}

/// Spawns `future`: allocates its task with `metadata` and `schedule` and returns the task's
/// first [`Runnable`] (not scheduled yet: run it or [`schedule`](Runnable::schedule) it) and its
/// [`JoinHandle`].
///
/// ```
/// use coro_benches::proto_task::{self, Runnable, ScheduleInfo};
/// let (runnable, handle) = proto_task::spawn(async { "done" }, |_: Runnable<()>, _: ScheduleInfo| {}, ());
/// assert!(!runnable.run());
/// assert_eq!(futures::executor::block_on(handle), Some("done"));
/// ```
pub fn spawn<F, S, M>(
    future: F,
    schedule: S,
    metadata: M,
) -> (Runnable<M>, JoinHandle<F::Output, M>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule<M>,
    M: Send + Sync + 'static,
{
    let layout = Layout::new::<Cell<F, F::Output, S, M>>();
    // SAFETY: `Cell` holds the header (non-zero size), so the layout is not zero-sized.
    let raw = unsafe { alloc(layout) }.cast::<Cell<F, F::Output, S, M>>();
    let Some(cell) = NonNull::new(raw) else {
        handle_alloc_error(layout)
    };
    let cell = cell.as_ptr();
    // SAFETY: `cell` is a fresh allocation of `Cell`'s layout, so each field pointer is valid
    // and aligned for a write; nothing else sees the allocation yet. The state counts the one
    // runnable returned here and the handle.
    unsafe {
        addr_of_mut!((*cell).header).write(Header {
            state: AtomicUsize::new(FRESH),
            vtable: &RawTask::<F, F::Output, S, M>::VTABLE,
            awaiter: UnsafeCell::new(None),
            metadata,
        });
        addr_of_mut!((*cell).schedule).write(schedule);
        addr_of_mut!((*cell).stage).write(UnsafeCell::new(Stage {
            future: ManuallyDrop::new(future),
        }));
    }
    // SAFETY: non-null, checked above.
    let ptr = unsafe { NonNull::new_unchecked(cell.cast::<()>()) };
    (
        Runnable {
            ptr,
            _marker: PhantomData,
        },
        JoinHandle {
            ptr: Some(ptr),
            _marker: PhantomData,
        },
    )
}

/// The header of the task at `ptr`. Unbounded lifetime: the caller holds a reference (a
/// runnable, a waker, the handle) for as long as it uses it.
///
/// # Safety
/// `ptr` is a live task with metadata type `M`.
#[inline]
unsafe fn header<'a, M>(ptr: NonNull<()>) -> &'a Header<M> {
    // SAFETY: the caller's; the header is at the start of the allocation (`repr(C)`).
    unsafe { &*ptr.cast::<Header<M>>().as_ptr() }
}

impl<M> Header<M> {
    /// Takes the awaiter out of its slot unless someone is registering or taking it (they will
    /// see the new state themselves); drops it instead if it would wake `current`.
    fn take(&self, current: Option<&Waker>) -> Option<Waker> {
        let state = self.state.fetch_or(NOTIFYING, AcqRel);
        if state & (NOTIFYING | REGISTERING) != 0 {
            return None;
        }
        // SAFETY: this thread set `NOTIFYING` while neither flag was set, so it alone reaches
        // the slot until it clears the flag below.
        let waker = unsafe { (*self.awaiter.get()).take() };
        self.state.fetch_and(!NOTIFYING & !AWAITER, AcqRel);
        match (waker, current) {
            (Some(w), Some(c)) if w.will_wake(c) => {
                abort_on_panic(|| drop(w));
                None
            }
            (w, _) => w,
        }
    }

    /// Stores `waker` as the awaiter (the handle's, one registration at a time); wakes it at
    /// once if the task is being notified meanwhile.
    fn register(&self, waker: &Waker) {
        let mut state = self.state.fetch_or(0, Acquire);
        loop {
            if state & NOTIFYING != 0 {
                abort_on_panic(|| waker.wake_by_ref());
                return;
            }
            match self
                .state
                .compare_exchange_weak(state, state | REGISTERING, AcqRel, Acquire)
            {
                Ok(_) => {
                    state |= REGISTERING;
                    break;
                }
                Err(s) => state = s,
            }
        }
        // SAFETY: this thread set `REGISTERING` while `NOTIFYING` was clear, so no one else
        // reaches the slot until it clears the flag (`take` backs off while it is set).
        unsafe { abort_on_panic(|| *self.awaiter.get() = Some(waker.clone())) };
        let mut taken = None;
        loop {
            if state & NOTIFYING != 0 {
                // A notifier backed off while this thread registered: take the waker back and
                // wake it, as the notifier would have.
                // SAFETY: `REGISTERING` is still this thread's.
                if let Some(w) = unsafe { (*self.awaiter.get()).take() } {
                    taken = Some(w);
                }
            }
            let new = if taken.is_none() {
                (state & !NOTIFYING & !REGISTERING) | AWAITER
            } else {
                state & !NOTIFYING & !REGISTERING & !AWAITER
            };
            match self
                .state
                .compare_exchange_weak(state, new, AcqRel, Acquire)
            {
                Ok(_) => break,
                Err(s) => state = s,
            }
        }
        if let Some(w) = taken {
            abort_on_panic(|| w.wake());
        }
    }
}

/// A wake-up's change to the state: sets `SCHEDULED` unless the task is scheduled (then only
/// publishes this thread's writes to the run that follows), finished or closed. Returns
/// whether the task was idle, so that the caller must hand a runnable to the schedule
/// function; `reference` is added to the count in that case (a wake by reference gives the
/// runnable a reference of its own; a wake by value hands on the waker's). A running task
/// needs no runnable: its run reschedules it with its own.
fn mark_woken<M>(header: &Header<M>, reference: usize) -> bool {
    let mut state = header.state.load(Acquire);
    loop {
        if state & (COMPLETED | CLOSED) != 0 {
            return false;
        }
        let idle = state & (SCHEDULED | RUNNING) == 0;
        let new = if idle {
            (state | SCHEDULED) + reference
        } else {
            state | SCHEDULED
        };
        match header
            .state
            .compare_exchange_weak(state, new, AcqRel, Acquire)
        {
            Ok(_) => {
                if idle && state > isize::MAX as usize {
                    std::process::abort();
                }
                return idle;
            }
            Err(s) => state = s,
        }
    }
}

/// The type-specific functions of a task, reached through its vtable.
struct RawTask<F, T, S, M>(PhantomData<(F, T, S, M)>);

impl<F, T, S, M> RawTask<F, T, S, M>
where
    F: Future<Output = T>,
    S: Schedule<M>,
{
    const VTABLE: TaskVTable = TaskVTable {
        schedule: Self::schedule,
        run: Self::run,
        drop_future: Self::drop_future,
        output: Self::output,
        destroy: Self::destroy,
        clone_waker: Self::clone_waker,
    };

    const WAKER_VTABLE: RawWakerVTable = RawWakerVTable::new(
        Self::clone_waker,
        Self::wake,
        Self::wake_by_ref,
        Self::drop_waker,
    );

    #[inline]
    fn cell(ptr: NonNull<()>) -> *mut Cell<F, T, S, M> {
        ptr.cast::<Cell<F, T, S, M>>().as_ptr()
    }

    /// Hands a reference the caller owns, as a runnable, to the schedule function.
    ///
    /// # Safety
    /// The caller owns one reference to the live task at `ptr`, and the task is marked
    /// scheduled and not running.
    unsafe fn schedule(ptr: NonNull<()>, info: ScheduleInfo) {
        let cell = Self::cell(ptr);
        // A schedule function with state is borrowed from the task during the call, and the
        // runnable might be run (and the task freed) inside it: hold a waker across the call.
        let _guard = (mem::size_of::<S>() > 0).then(|| {
            // SAFETY: the caller's reference keeps the task alive until it is handed over.
            unsafe { Waker::from_raw(Self::clone_waker(ptr.as_ptr())) }
        });
        let runnable = Runnable {
            ptr,
            _marker: PhantomData,
        };
        // SAFETY: the task is alive (the caller's reference, now the runnable's, and `_guard`
        // for a schedule function with state); a zero-sized one is read from no memory.
        unsafe { (*cell).schedule.schedule(runnable, info) };
    }

    /// Drops the future in place.
    ///
    /// # Safety
    /// The caller alone reaches the future (running it, or the task is closed or unreachable
    /// and no runnable runs it), and it was not dropped yet.
    unsafe fn drop_future(ptr: NonNull<()>) {
        let stage = Self::cell(ptr);
        // SAFETY: the caller's; the union's active field is the future.
        abort_on_panic(|| unsafe { ManuallyDrop::drop(&mut (*(*stage).stage.get()).future) });
    }

    /// Where the output is.
    ///
    /// # Safety
    /// `ptr` is a live task of this type.
    unsafe fn output(ptr: NonNull<()>) -> *mut () {
        // SAFETY: the caller's; the projection does not read anything.
        unsafe { addr_of_mut!((*(*Self::cell(ptr)).stage.get()).output).cast() }
    }

    /// Drops the header (awaiter slot, metadata) and the schedule function, and frees the
    /// allocation.
    ///
    /// # Safety
    /// No reference to the task is left (count zero, no handle), and its future and output are
    /// already dropped or taken.
    unsafe fn destroy(ptr: NonNull<()>) {
        let cell = Self::cell(ptr);
        // SAFETY: the caller's: this thread alone reaches the task; both fields are initialised
        // and dropped once, here; the stage holds nothing to drop.
        unsafe {
            abort_on_panic(|| {
                ptr::drop_in_place(addr_of_mut!((*cell).header));
                ptr::drop_in_place(addr_of_mut!((*cell).schedule));
            });
            dealloc(cell.cast(), Layout::new::<Cell<F, T, S, M>>());
        }
    }

    /// Lets go of a reference that does not need the future dropped (the future is gone, or
    /// the handle still exists and will see to it).
    ///
    /// # Safety
    /// The caller owns one reference to the live task at `ptr`.
    unsafe fn drop_ref(ptr: NonNull<()>) {
        // SAFETY: the caller's reference keeps the task alive for this call.
        let header = unsafe { header::<M>(ptr) };
        let new = header.state.fetch_sub(REFERENCE, AcqRel) - REFERENCE;
        if new & (REFS | HANDLE) == 0 {
            // SAFETY: the last reference, and the handle is gone: the task is this thread's.
            unsafe { Self::destroy(ptr) };
        }
    }

    /// Polls the future once; returns whether it was rescheduled because it was woken while
    /// running.
    ///
    /// # Safety
    /// The caller gives up a runnable for the task at `ptr` (its reference).
    unsafe fn run(ptr: NonNull<()>) -> bool {
        let cell = Self::cell(ptr);
        // SAFETY: the runnable's reference keeps the task alive until this function lets go.
        let header = unsafe { header::<M>(ptr) };
        // A runnable exists only while the task is scheduled and not running: the increment
        // clears `SCHEDULED` and sets `RUNNING`. Acquire: the previous run's writes to the
        // future, and a waker's before it woke the task.
        let mut state = header.state.fetch_add(RUNNING - SCHEDULED, Acquire) + RUNNING - SCHEDULED;
        debug_assert!(state & RUNNING != 0 && state & SCHEDULED == 0 && state & COMPLETED == 0);
        if state & CLOSED != 0 {
            // Cancelled while queued: drop the future, leave, tell the handle.
            // SAFETY: closed and now marked running by this thread: no one else polls or drops
            // the future, and it was not dropped (only a run or an exclusive owner drops it).
            unsafe { Self::drop_future(ptr) };
            // SAFETY: the runnable's reference.
            unsafe { Self::leave_closed(ptr) };
            return false;
        }

        // The runnable's reference, lent to the waker for this poll.
        let waker = ManuallyDrop::new(
            // SAFETY: the waker vtable's functions take a pointer to a live task of this type,
            // which `ptr` is while the runnable's reference is held (for the whole poll).
            unsafe { Waker::from_raw(RawWaker::new(ptr.as_ptr(), &Self::WAKER_VTABLE)) },
        );
        let mut cx = Context::from_waker(&waker);
        let guard = PanicGuard::<F, T, S, M>(ptr, PhantomData);
        // SAFETY: the future is pinned in the allocation (never moved until dropped in place),
        // and this thread alone reaches it while `RUNNING` is its own.
        let poll = unsafe {
            let future = &mut *(*(*cell).stage.get()).future;
            Pin::new_unchecked(future).poll(&mut cx)
        };
        mem::forget(guard);

        match poll {
            Poll::Ready(out) => {
                // SAFETY: finished, this thread's while running.
                unsafe { Self::drop_future(ptr) };
                // With no handle nobody takes the output: drop it rather than store it. (The
                // handle only ever goes away, so a handle seen gone stays gone.)
                let stored = state & HANDLE != 0;
                if stored {
                    // SAFETY: the future was dropped: the union's slot is free.
                    unsafe { (*(*cell).stage.get()).output = ManuallyDrop::new(out) };
                } else {
                    abort_on_panic(|| drop(out));
                }
                loop {
                    let orphaned = stored && (state & HANDLE == 0 || state & CLOSED != 0);
                    // Keep the reference while the task must still be touched after the
                    // exchange: the handle may free it as soon as it sees `COMPLETED`.
                    let keep = orphaned || state & AWAITER != 0;
                    let mut new = (state & !RUNNING & !SCHEDULED) | COMPLETED;
                    if state & HANDLE == 0 {
                        new |= CLOSED;
                    }
                    if !keep {
                        new -= REFERENCE;
                    }
                    match header
                        .state
                        .compare_exchange_weak(state, new, AcqRel, Acquire)
                    {
                        Ok(_) => {
                            if keep {
                                if orphaned {
                                    // SAFETY: stored above, and nobody takes it: the handle is
                                    // gone or closed the task.
                                    abort_on_panic(|| unsafe {
                                        ManuallyDrop::drop(&mut (*(*cell).stage.get()).output)
                                    });
                                }
                                let awaiter = if state & AWAITER != 0 {
                                    header.take(None)
                                } else {
                                    None
                                };
                                // SAFETY: the runnable's reference, kept above.
                                unsafe { Self::drop_ref(ptr) };
                                if let Some(w) = awaiter {
                                    abort_on_panic(|| w.wake());
                                }
                            } else if new & (REFS | HANDLE) == 0 {
                                // SAFETY: the last reference went in the exchange and there is
                                // no handle: the task is this thread's; the future was
                                // dropped and the output was not stored.
                                unsafe { Self::destroy(ptr) };
                            }
                            return false;
                        }
                        Err(s) => state = s,
                    }
                }
            }
            Poll::Pending => loop {
                if state & CLOSED != 0 {
                    // Cancelled while running: this thread drops the future.
                    // SAFETY: still running: the future is this thread's and not dropped.
                    unsafe { Self::drop_future(ptr) };
                    // SAFETY: the runnable's reference.
                    unsafe { Self::leave_closed(ptr) };
                    return false;
                }
                if state & SCHEDULED != 0 {
                    // Woken while running: the wake left the runnable's reference to this run,
                    // which reschedules the task with it.
                    match header.state.compare_exchange_weak(
                        state,
                        state & !RUNNING,
                        AcqRel,
                        Acquire,
                    ) {
                        Ok(_) => {
                            // SAFETY: the runnable's reference; scheduled and not running.
                            unsafe {
                                Self::schedule(
                                    ptr,
                                    ScheduleInfo {
                                        woken_while_running: true,
                                    },
                                )
                            };
                            return true;
                        }
                        Err(s) => state = s,
                    }
                } else {
                    let new = (state & !RUNNING) - REFERENCE;
                    match header
                        .state
                        .compare_exchange_weak(state, new, AcqRel, Acquire)
                    {
                        Ok(_) => {
                            if new & (REFS | HANDLE) == 0 {
                                // No waker, no runnable, no handle: nobody can wake or await
                                // the task again, and nobody else reaches it.
                                // SAFETY: the task is this thread's; its future is still there
                                // (not finished, not closed).
                                unsafe {
                                    Self::drop_future(ptr);
                                    Self::destroy(ptr);
                                }
                            }
                            return false;
                        }
                        Err(s) => state = s,
                    }
                }
            },
        }
    }

    /// The end of a run of a closed task whose future this thread just dropped: clears
    /// `RUNNING` and `SCHEDULED`, wakes the awaiter (the handle returns `None` once the task is
    /// neither), and lets go of the runnable's reference.
    ///
    /// # Safety
    /// The caller owns the runnable's reference, marked the task running, and dropped the
    /// future.
    unsafe fn leave_closed(ptr: NonNull<()>) {
        // SAFETY: the caller's reference.
        let header = unsafe { header::<M>(ptr) };
        let state = header.state.fetch_and(!RUNNING & !SCHEDULED, AcqRel);
        let awaiter = if state & AWAITER != 0 {
            header.take(None)
        } else {
            None
        };
        // SAFETY: the caller's reference, given up here.
        unsafe { Self::drop_ref(ptr) };
        if let Some(w) = awaiter {
            abort_on_panic(|| w.wake());
        }
    }

    /// The waker's `clone`: one more reference.
    ///
    /// # Safety
    /// `ptr` is a live task of this type, kept alive by the waker being cloned.
    unsafe fn clone_waker(ptr: *const ()) -> RawWaker {
        // SAFETY: the caller's; a waker's pointer is never null.
        let header = unsafe { header::<M>(NonNull::new_unchecked(ptr.cast_mut())) };
        // Relaxed, as any reference count's increment: the clone is made from a live reference.
        let state = header.state.fetch_add(REFERENCE, Relaxed);
        if state > isize::MAX as usize {
            std::process::abort();
        }
        RawWaker::new(ptr, &Self::WAKER_VTABLE)
    }

    /// The waker's `wake_by_ref`: schedules the task unless it is scheduled, finished or
    /// closed; if it is running, marks it so that the run reschedules it.
    ///
    /// # Safety
    /// `ptr` is a live task of this type, kept alive by the waker.
    unsafe fn wake_by_ref(ptr: *const ()) {
        // SAFETY: the caller's; a waker's pointer is never null.
        let ptr = unsafe { NonNull::new_unchecked(ptr.cast_mut()) };
        // SAFETY: the caller's.
        if mark_woken(unsafe { header::<M>(ptr) }, REFERENCE) {
            // SAFETY: the reference `mark_woken` added; scheduled, not running.
            unsafe { Self::schedule(ptr, ScheduleInfo::default()) };
        }
    }

    /// The waker's `wake`: as `wake_by_ref`, handing the waker's own reference to the new
    /// runnable when there is one.
    ///
    /// # Safety
    /// `ptr` is a live task of this type; the caller gives up the waker's reference.
    unsafe fn wake(ptr: *const ()) {
        // SAFETY: the caller's; a waker's pointer is never null.
        let nn = unsafe { NonNull::new_unchecked(ptr.cast_mut()) };
        // SAFETY: the waker's reference keeps the task alive until it is dropped or handed on.
        if mark_woken(unsafe { header::<M>(nn) }, 0) {
            // SAFETY: the waker's reference becomes the runnable's; scheduled, not running.
            unsafe { Self::schedule(nn, ScheduleInfo::default()) };
        } else {
            // SAFETY: the waker's reference, not handed on.
            unsafe { Self::drop_waker(ptr) };
        }
    }

    /// The waker's `drop`: one reference less; the last one, with the handle gone and the
    /// future neither finished nor cancelled, drops the future (nobody can wake it again).
    ///
    /// # Safety
    /// `ptr` is a live task of this type; the caller gives up the waker's reference.
    unsafe fn drop_waker(ptr: *const ()) {
        // SAFETY: the caller's; a waker's pointer is never null.
        let ptr = unsafe { NonNull::new_unchecked(ptr.cast_mut()) };
        // SAFETY: the caller's reference keeps the task alive for this call.
        let header = unsafe { header::<M>(ptr) };
        let new = header.state.fetch_sub(REFERENCE, AcqRel) - REFERENCE;
        if new & (REFS | HANDLE) == 0 {
            // No reference is left, so neither a runnable nor a run: the task is this
            // thread's. A future neither finished nor closed is still in place.
            if new & (COMPLETED | CLOSED) == 0 {
                // SAFETY: this thread's, not dropped (only a run or an owner drops it).
                unsafe { Self::drop_future(ptr) };
            }
            // SAFETY: this thread's; future dropped, output taken or dropped.
            unsafe { Self::destroy(ptr) };
        }
    }
}

/// Armed around a poll: if it unwinds, closes the task, drops the future, tells the handle and
/// lets go of the runnable's reference, then lets the panic go on.
struct PanicGuard<F, T, S, M>(NonNull<()>, PhantomData<(F, T, S, M)>)
where
    F: Future<Output = T>,
    S: Schedule<M>;

impl<F, T, S, M> Drop for PanicGuard<F, T, S, M>
where
    F: Future<Output = T>,
    S: Schedule<M>,
{
    fn drop(&mut self) {
        let ptr = self.0;
        // SAFETY: the run's reference is still held (the guard is dropped only by an unwinding
        // poll, before the run lets go of anything).
        let header = unsafe { header::<M>(ptr) };
        // Closed first, so that no wake schedules the task again.
        header.state.fetch_or(CLOSED, AcqRel);
        // SAFETY: still marked running by this thread: the future is its own, and not dropped
        // (a future that panicked in `poll` is still a value to drop).
        unsafe { RawTask::<F, T, S, M>::drop_future(ptr) };
        // SAFETY: the run's reference, marked running, future dropped.
        unsafe { RawTask::<F, T, S, M>::leave_closed(ptr) };
    }
}

/// A task ready to be polled: [`run`](Runnable::run) it (once), or drop it, which cancels the
/// task and drops its future.
///
/// ```
/// use coro_benches::proto_task::{self, Runnable, ScheduleInfo};
/// let (runnable, handle) = proto_task::spawn(async { 1 }, |_: Runnable<()>, _: ScheduleInfo| {}, ());
/// drop(runnable);
/// assert_eq!(futures::executor::block_on(handle), None);
/// ```
pub struct Runnable<M> {
    ptr: NonNull<()>,
    _marker: PhantomData<M>,
}

// SAFETY: a runnable is a counted reference to a task whose future and output are `Send`
// (`spawn`'s bounds); the metadata is reached through `&M` from whichever thread holds it.
unsafe impl<M: Send + Sync> Send for Runnable<M> {}
// SAFETY: `&Runnable` only reads the metadata (`M: Sync`) or clones a waker (atomic).
unsafe impl<M: Send + Sync> Sync for Runnable<M> {}

impl<M> Runnable<M> {
    /// Polls the task's future once. Returns `true` if the task was woken while it ran and is
    /// already rescheduled. A panic in the future unwinds out of this call after the task is
    /// closed and its future dropped (the handle resolves `None`).
    ///
    /// ```
    /// use coro_benches::proto_task::{self, Runnable, ScheduleInfo};
    /// let (runnable, handle) = proto_task::spawn(async { 3 }, |_: Runnable<()>, _: ScheduleInfo| {}, ());
    /// assert!(!runnable.run());
    /// assert_eq!(futures::executor::block_on(handle), Some(3));
    /// ```
    pub fn run(self) -> bool {
        let ptr = self.ptr;
        mem::forget(self);
        // SAFETY: the runnable's reference to a live task, given up to the run.
        unsafe { (header::<M>(ptr).vtable.run)(ptr) }
    }

    /// Passes the runnable to the task's schedule function.
    ///
    /// ```
    /// use coro_benches::proto_task::{self, Runnable, ScheduleInfo};
    /// use std::sync::mpsc;
    /// let (tx, rx) = mpsc::channel();
    /// let tx = std::sync::Mutex::new(tx);
    /// let (runnable, _handle) = proto_task::spawn(async {}, move |r: Runnable<()>, _: ScheduleInfo| {
    ///     tx.lock().unwrap().send(r).unwrap()
    /// }, ());
    /// runnable.schedule();
    /// assert!(rx.try_recv().is_ok());
    /// ```
    pub fn schedule(self) {
        let ptr = self.ptr;
        mem::forget(self);
        // SAFETY: the runnable's reference to a live task (scheduled, not running), handed to
        // the schedule function.
        unsafe { (header::<M>(ptr).vtable.schedule)(ptr, ScheduleInfo::default()) }
    }

    /// The task's metadata.
    ///
    /// ```
    /// use coro_benches::proto_task::{self, Runnable, ScheduleInfo};
    /// let (runnable, _handle) = proto_task::spawn(async {}, |_: Runnable<u8>, _: ScheduleInfo| {}, 9u8);
    /// assert_eq!(*runnable.metadata(), 9);
    /// ```
    pub fn metadata(&self) -> &M {
        // SAFETY: the runnable's reference keeps the task (and its metadata) alive while
        // `self` is borrowed.
        unsafe { &header::<M>(self.ptr).metadata }
    }

    /// A waker for the task (one more reference).
    ///
    /// ```
    /// use coro_benches::proto_task::{self, Runnable, ScheduleInfo};
    /// let (runnable, handle) = proto_task::spawn(async {}, |_: Runnable<()>, _: ScheduleInfo| {}, ());
    /// let waker = runnable.waker();
    /// assert!(waker.will_wake(&runnable.waker()));
    /// drop(handle);
    /// ```
    pub fn waker(&self) -> Waker {
        // SAFETY: the runnable's reference keeps the task alive; `clone_waker` returns a raw
        // waker with its own reference and the task's waker vtable.
        unsafe {
            let header = header::<M>(self.ptr);
            let raw = (header.vtable.clone_waker)(self.ptr.as_ptr());
            Waker::from_raw(raw)
        }
    }
}

impl<M> Drop for Runnable<M> {
    /// Cancels the task: closes it, drops its future and lets go of the reference.
    fn drop(&mut self) {
        let ptr = self.ptr;
        // SAFETY: the runnable's reference keeps the task alive until `drop_ref` below.
        let header = unsafe { header::<M>(ptr) };
        // A runnable's task is scheduled, not running, not finished: closing it makes the
        // future this thread's (wakes no longer schedule it; the handle waits for
        // `SCHEDULED` to clear).
        let state = header.state.fetch_or(CLOSED, AcqRel);
        debug_assert!(state & (SCHEDULED | COMPLETED | RUNNING) == SCHEDULED);
        let vtable = header.vtable;
        // SAFETY: this thread's (above) and not dropped: a closed task's future is dropped by
        // the one run (or runnable) that holds it, which is this one.
        unsafe { (vtable.drop_future)(ptr) };
        let state = header.state.fetch_and(!SCHEDULED, AcqRel);
        let awaiter = if state & AWAITER != 0 {
            header.take(None)
        } else {
            None
        };
        // The reference goes last: the awaiter slot is read above. Without a handle and with
        // no waker left this frees the task.
        let new = header.state.fetch_sub(REFERENCE, AcqRel) - REFERENCE;
        if new & (REFS | HANDLE) == 0 {
            // SAFETY: the last reference, no handle; future dropped, no output.
            unsafe { (vtable.destroy)(ptr) };
        }
        if let Some(w) = awaiter {
            abort_on_panic(|| w.wake());
        }
    }
}

/// The handle of a spawned task: a future of its output, `None` if the task was cancelled or
/// its future panicked. Dropping it cancels the task (its future is dropped);
/// [`detach`](JoinHandle::detach) lets the task run on without it.
///
/// ```
/// use coro_benches::proto_task::{self, Runnable, ScheduleInfo};
/// let (runnable, handle) = proto_task::spawn(async { 2 }, |_: Runnable<()>, _: ScheduleInfo| {}, ());
/// runnable.run();
/// assert_eq!(futures::executor::block_on(handle), Some(2));
/// ```
pub struct JoinHandle<T, M> {
    /// `None` once the handle resolved (it let go of the task then).
    ptr: Option<NonNull<()>>,
    _marker: PhantomData<(T, M)>,
}

// SAFETY: the handle moves the output (`T: Send`) to its thread and reads the metadata
// (`M: Sync`); the task is shared through atomics.
unsafe impl<T: Send, M: Send + Sync> Send for JoinHandle<T, M> {}

impl<T, M> Unpin for JoinHandle<T, M> {}

impl<T, M> JoinHandle<T, M> {
    /// Lets the task run to completion without the handle; its output is dropped.
    ///
    /// ```
    /// use coro_benches::proto_task::{self, Runnable, ScheduleInfo};
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let r = ran.clone();
    /// let (runnable, handle) = proto_task::spawn(
    ///     async move { r.store(true, Ordering::Relaxed) },
    ///     |_: Runnable<()>, _: ScheduleInfo| {},
    ///     (),
    /// );
    /// handle.detach();
    /// runnable.run();
    /// assert!(ran.load(Ordering::Relaxed));
    /// ```
    pub fn detach(mut self) {
        if let Some(ptr) = self.ptr.take() {
            // SAFETY: the handle is this one's, given up here.
            drop(unsafe { release::<T, M>(ptr, false, FRESH) });
        }
    }
}

/// Lets go of the handle of the task at `ptr`, cancelling the task first if `cancel` and it is
/// not finished; returns the output if the task finished and nobody took it. `state` is the
/// caller's guess of the state word (a wrong guess costs a failed exchange).
///
/// # Safety
/// The caller gives up the task's handle.
unsafe fn release<T, M>(ptr: NonNull<()>, cancel: bool, mut state: usize) -> Option<T> {
    // SAFETY: the handle keeps the task alive until `HANDLE` is cleared below.
    let header = unsafe { header::<M>(ptr) };
    // Only the handle closes a finished task, and the output stays until it does: once seen
    // finished and open, the output is the handle's (read exactly once, here).
    let mut output = None;
    loop {
        if output.is_none() && state & (COMPLETED | CLOSED) == COMPLETED {
            // SAFETY: the output is stored and is the handle's (above); Acquire on the load
            // that saw `COMPLETED` orders the run's write before this read.
            output = Some(unsafe { ((header.vtable.output)(ptr) as *mut ManuallyDrop<T>).read() });
        }
        let (new, drop_future) = if state & COMPLETED != 0 {
            ((state | CLOSED) & !HANDLE, false)
        } else if state & CLOSED != 0 || !cancel {
            (state & !HANDLE, false)
        } else if state & (SCHEDULED | RUNNING) != 0 {
            // Cancelled: the run (or the runnable's drop) drops the future.
            ((state | CLOSED) & !HANDLE, false)
        } else {
            // Idle: closed, the future is the handle's to drop; the handle stays until then.
            (state | CLOSED, true)
        };
        match header
            .state
            .compare_exchange_weak(state, new, AcqRel, Acquire)
        {
            Ok(_) => {
                if drop_future {
                    // SAFETY: closed while neither scheduled nor running, so no run and no
                    // new runnable reaches the future; this thread drops it once.
                    unsafe { (header.vtable.drop_future)(ptr) };
                    let new = header.state.fetch_and(!HANDLE, AcqRel) & !HANDLE;
                    if new & REFS == 0 {
                        // SAFETY: no reference left and the handle gone: the task is this
                        // thread's; the future was just dropped, there is no output.
                        unsafe { (header.vtable.destroy)(ptr) };
                    }
                } else if new & (REFS | HANDLE) == 0 {
                    if new & (COMPLETED | CLOSED) == 0 {
                        // Detached with no reference left: nobody can wake the future again.
                        // SAFETY: no reference, no handle: the task is this thread's, its
                        // future still in place.
                        unsafe { (header.vtable.drop_future)(ptr) };
                    }
                    // SAFETY: the task is this thread's; its output was read above or dropped
                    // by the run, its future dropped.
                    unsafe { (header.vtable.destroy)(ptr) };
                }
                return output.map(ManuallyDrop::into_inner);
            }
            Err(s) => state = s,
        }
    }
}

impl<T, M> Drop for JoinHandle<T, M> {
    fn drop(&mut self) {
        if let Some(ptr) = self.ptr.take() {
            // SAFETY: the handle is this one's, given up here; the output, if any, is dropped
            // here, after the task is let go (a panic in its destructor unwinds from here).
            drop(unsafe { release::<T, M>(ptr, true, FRESH) });
        }
    }
}

impl<T, M> Future for JoinHandle<T, M> {
    type Output = Option<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let ptr = self
            .ptr
            .expect("a proto_task::JoinHandle was polled after it resolved");
        // SAFETY: the handle keeps the task alive until it is let go (`release`).
        let header = unsafe { header::<M>(ptr) };
        let mut state = header.state.load(Acquire);
        loop {
            if state & CLOSED != 0 {
                // Cancelled, or its future panicked: resolve once the future is dropped (the
                // run or runnable that drops it clears `SCHEDULED` and `RUNNING` after).
                if state & (SCHEDULED | RUNNING) != 0 {
                    header.register(cx.waker());
                    state = header.state.load(Acquire);
                    if state & (SCHEDULED | RUNNING) != 0 {
                        return Poll::Pending;
                    }
                }
                if let Some(w) = header.take(Some(cx.waker())) {
                    abort_on_panic(|| w.wake());
                }
                self.ptr = None;
                // SAFETY: the handle, given up here; closed and not finished: no output.
                let output = unsafe { release::<T, M>(ptr, false, state) };
                debug_assert!(output.is_none());
                return Poll::Ready(None);
            }
            if state & COMPLETED != 0 {
                self.ptr = None;
                // SAFETY: the handle, given up here; finished and open, so `release` takes the
                // output.
                return Poll::Ready(unsafe { release::<T, M>(ptr, false, state) });
            }
            header.register(cx.waker());
            state = header.state.load(Acquire);
            if state & (COMPLETED | CLOSED) == 0 {
                return Poll::Pending;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::{Arc, Mutex};

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    /// Drop counters of a task's future and allocation (its metadata is dropped once, when the
    /// allocation is freed), how often it was scheduled, and its queue. (Outputs count their
    /// own drops.)
    #[derive(Default, Clone)]
    struct Counts {
        future: Arc<AtomicUsize>,
        freed: Arc<AtomicUsize>,
        scheduled: Arc<AtomicUsize>,
        woken_while_running: Arc<AtomicUsize>,
        queue: Arc<Mutex<VecDeque<Runnable<Counted>>>>,
    }

    impl Counts {
        fn get(c: &Arc<AtomicUsize>) -> usize {
            c.load(SeqCst)
        }

        /// Spawns `body` (given a drop-counted value that lives in the future) with a schedule
        /// function that queues the runnable, counting.
        fn spawn<F, T>(
            &self,
            body: impl FnOnce(Counted) -> F,
        ) -> (Runnable<Counted>, JoinHandle<T, Counted>)
        where
            F: Future<Output = T> + Send + 'static,
            T: Send + 'static,
        {
            let (queue, scheduled, woken) = (
                self.queue.clone(),
                self.scheduled.clone(),
                self.woken_while_running.clone(),
            );
            spawn(
                body(Counted(self.future.clone())),
                // Queued first, counted after: a test that waits for the count finds the
                // runnable queued.
                move |r: Runnable<Counted>, info: ScheduleInfo| {
                    queue.lock().unwrap().push_back(r);
                    if info.woken_while_running {
                        woken.fetch_add(1, SeqCst);
                    }
                    scheduled.fetch_add(1, SeqCst);
                },
                Counted(self.freed.clone()),
            )
        }

        fn pop(&self) -> Option<Runnable<Counted>> {
            self.queue.lock().unwrap().pop_front()
        }
    }

    fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
        Pin::new(f).poll(&mut Context::from_waker(Waker::noop()))
    }

    /// Pending the first time it is polled (after `on_first` ran with the context), then ready.
    struct PendingOnce<G: FnMut(&mut Context<'_>)> {
        polled: bool,
        on_first: G,
    }

    impl<G: FnMut(&mut Context<'_>) + Unpin> Future for PendingOnce<G> {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.polled {
                return Poll::Ready(());
            }
            self.polled = true;
            (self.on_first)(cx);
            Poll::Pending
        }
    }

    fn pending_once<G: FnMut(&mut Context<'_>) + Unpin>(on_first: G) -> PendingOnce<G> {
        PendingOnce {
            polled: false,
            on_first,
        }
    }

    #[test]
    fn output_is_delivered_and_dropped_once() {
        let counts = Counts::default();
        let output = Arc::new(AtomicUsize::new(0));
        let out = output.clone();
        let (runnable, mut handle) = counts.spawn(|f| async move {
            let _f = f;
            (41 + 1, Counted(out))
        });
        assert!(poll_once(&mut handle).is_pending());
        assert!(!runnable.run());
        assert_eq!(Counts::get(&counts.future), 1);
        assert_eq!(
            Counts::get(&counts.freed),
            0,
            "the handle still holds the task"
        );
        let Poll::Ready(Some((value, counted))) = poll_once(&mut handle) else {
            panic!("the handle did not resolve to the output");
        };
        assert_eq!(value, 42);
        assert_eq!(Counts::get(&counts.freed), 1);
        assert_eq!(Counts::get(&output), 0);
        drop(counted);
        drop(handle);
        assert_eq!(Counts::get(&output), 1);
        assert_eq!(Counts::get(&counts.freed), 1);
        assert_eq!(Counts::get(&counts.future), 1);
    }

    #[test]
    fn wakers_keep_the_task_until_the_last_one_and_free_it_once() {
        let counts = Counts::default();
        let output = Arc::new(AtomicUsize::new(0));
        let out = output.clone();
        let stash: Arc<Mutex<Vec<Waker>>> = Arc::default();
        let s = stash.clone();
        let (runnable, mut handle) = counts.spawn(move |f| async move {
            let _f = f;
            pending_once(move |cx| {
                let mut stash = s.lock().unwrap();
                for _ in 0..3 {
                    stash.push(cx.waker().clone());
                }
            })
            .await;
            Counted(out)
        });
        assert!(!runnable.run());
        assert_eq!(stash.lock().unwrap().len(), 3);
        // Wake through one clone by value, one by reference; drop the third unused.
        let mut wakers = std::mem::take(&mut *stash.lock().unwrap());
        let third = wakers.pop().unwrap();
        let second = wakers.pop().unwrap();
        wakers.pop().unwrap().wake();
        second.wake_by_ref();
        assert_eq!(
            Counts::get(&counts.scheduled),
            1,
            "woken twice, scheduled once"
        );
        counts.pop().unwrap().run();
        assert!(counts.pop().is_none());
        assert_eq!(Counts::get(&counts.future), 1);
        assert!(matches!(poll_once(&mut handle), Poll::Ready(Some(_))));
        assert_eq!(Counts::get(&output), 1);
        assert_eq!(Counts::get(&counts.freed), 0, "two wakers are still alive");
        second.wake();
        assert_eq!(Counts::get(&counts.freed), 0, "one waker is still alive");
        drop(third);
        assert_eq!(Counts::get(&counts.freed), 1);
        drop(handle);
        assert_eq!(Counts::get(&counts.freed), 1);
        assert_eq!(Counts::get(&counts.future), 1);
        assert_eq!(Counts::get(&counts.scheduled), 1);
    }

    #[test]
    fn a_wake_while_running_reschedules_once() {
        let counts = Counts::default();
        let (runnable, mut handle) = counts.spawn(|f| async move {
            let _f = f;
            pending_once(|cx| {
                cx.waker().wake_by_ref();
                cx.waker().wake_by_ref();
                // By value too: the clone's reference is handed on or dropped, not leaked.
                let clone = cx.waker().clone();
                clone.wake();
            })
            .await;
            7
        });
        assert!(
            runnable.run(),
            "woken while running: rescheduled by the run"
        );
        assert_eq!(Counts::get(&counts.scheduled), 1);
        assert_eq!(Counts::get(&counts.woken_while_running), 1);
        let again = counts.pop().unwrap();
        assert!(counts.pop().is_none());
        assert!(!again.run());
        assert_eq!(poll_once(&mut handle), Poll::Ready(Some(7)));
        assert_eq!(Counts::get(&counts.freed), 1);
        assert_eq!(Counts::get(&counts.future), 1);
    }

    #[test]
    fn dropping_the_handle_cancels_and_drops_the_future() {
        // Idle (suspended, a waker stashed): the handle's drop drops the future.
        let counts = Counts::default();
        let stash: Arc<Mutex<Option<Waker>>> = Arc::default();
        let s = stash.clone();
        let (runnable, handle) = counts.spawn(move |f| async move {
            let _f = f;
            pending_once(move |cx| *s.lock().unwrap() = Some(cx.waker().clone())).await;
            unreachable!("a cancelled task was polled again");
        });
        assert!(!runnable.run());
        assert_eq!(Counts::get(&counts.future), 0);
        drop::<JoinHandle<(), _>>(handle);
        assert_eq!(Counts::get(&counts.future), 1);
        assert_eq!(Counts::get(&counts.freed), 0, "the stashed waker holds it");
        stash.lock().unwrap().take().unwrap().wake();
        assert!(counts.pop().is_none(), "a cancelled task is not scheduled");
        assert_eq!(Counts::get(&counts.freed), 1);

        // Queued (never polled): the run drops the future without polling it.
        let counts = Counts::default();
        let polled = Arc::new(AtomicBool::new(false));
        let p = polled.clone();
        let (runnable, handle) = counts.spawn(move |f| async move {
            let _f = f;
            p.store(true, SeqCst);
        });
        runnable.schedule();
        drop(handle);
        assert_eq!(Counts::get(&counts.future), 0);
        assert!(!counts.pop().unwrap().run());
        assert!(!polled.load(SeqCst));
        assert_eq!(Counts::get(&counts.future), 1);
        assert_eq!(Counts::get(&counts.freed), 1);
    }

    #[test]
    fn a_detached_task_runs_to_completion() {
        let counts = Counts::default();
        let output = Arc::new(AtomicUsize::new(0));
        let out = output.clone();
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let (runnable, handle) = counts.spawn(move |f| async move {
            let _f = f;
            pending_once(|cx| cx.waker().wake_by_ref()).await;
            r.store(true, SeqCst);
            Counted(out)
        });
        handle.detach();
        assert!(runnable.run());
        assert!(!ran.load(SeqCst));
        assert!(!counts.pop().unwrap().run());
        assert!(ran.load(SeqCst));
        assert_eq!(Counts::get(&counts.future), 1);
        assert_eq!(
            Counts::get(&output),
            1,
            "nobody takes the output: the task drops it"
        );
        assert_eq!(Counts::get(&counts.freed), 1);
    }

    #[test]
    fn a_detached_task_nobody_can_wake_is_dropped() {
        let counts = Counts::default();
        let (runnable, handle) = counts.spawn(|f| async move {
            let _f = f;
            std::future::pending::<()>().await;
        });
        handle.detach();
        assert!(!runnable.run());
        assert_eq!(Counts::get(&counts.future), 1);
        assert_eq!(Counts::get(&counts.freed), 1);
    }

    #[test]
    fn a_wake_from_another_thread_schedules_once() {
        for _ in 0..if cfg!(miri) { 4 } else { 200 } {
            let counts = Counts::default();
            let (runnable, mut handle) = counts.spawn(|f| async move {
                let _f = f;
                let mut woken = None;
                pending_once(|cx| {
                    let waker = cx.waker().clone();
                    // Woken three times while the task may still be running.
                    woken = Some(std::thread::spawn(move || {
                        waker.wake_by_ref();
                        waker.wake_by_ref();
                        waker.wake();
                    }));
                })
                .await;
                woken.unwrap().join().unwrap();
                5
            });
            let rescheduled = runnable.run();
            // Wait until the thread's wakes are over: the run below joins it.
            while Counts::get(&counts.scheduled) == 0 {
                std::thread::yield_now();
            }
            assert_eq!(Counts::get(&counts.scheduled), 1);
            assert_eq!(
                Counts::get(&counts.woken_while_running),
                usize::from(rescheduled)
            );
            assert!(!counts.pop().unwrap().run());
            assert!(counts.pop().is_none());
            assert_eq!(Counts::get(&counts.scheduled), 1);
            assert_eq!(poll_once(&mut handle), Poll::Ready(Some(5)));
            assert_eq!(Counts::get(&counts.future), 1);
            assert_eq!(Counts::get(&counts.freed), 1);
        }
    }

    #[test]
    fn a_handle_awaiting_on_another_thread_is_woken_with_the_output() {
        let counts = Counts::default();
        let (runnable, handle) = counts.spawn(|f| async move {
            let _f = f;
            pending_once(|cx| cx.waker().wake_by_ref()).await;
            11
        });
        let joiner = std::thread::spawn(move || futures::executor::block_on(handle));
        assert!(runnable.run());
        assert!(!counts.pop().unwrap().run());
        assert_eq!(joiner.join().unwrap(), Some(11));
        assert_eq!(Counts::get(&counts.future), 1);
        assert_eq!(Counts::get(&counts.freed), 1);
    }

    #[test]
    fn a_panic_unwinds_out_of_run_and_the_handle_resolves_none() {
        let counts = Counts::default();
        let (runnable, mut handle) = counts.spawn(|f| async move {
            let _f = f;
            pending_once(|cx| cx.waker().wake_by_ref()).await;
            panic!("the future panics");
        });
        assert!(runnable.run());
        let second = counts.pop().unwrap();
        let waker = second.waker();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| second.run()));
        assert!(unwound.is_err());
        assert_eq!(Counts::get(&counts.future), 1);
        waker.wake();
        assert!(
            counts.pop().is_none(),
            "a task that panicked is not scheduled again"
        );
        assert_eq!(poll_once(&mut handle), Poll::Ready(None));
        assert_eq!(Counts::get(&counts.freed), 1);
        assert_eq!(Counts::get(&counts.future), 1);
    }

    #[test]
    fn dropping_the_runnable_cancels_the_task() {
        let counts = Counts::default();
        let (runnable, handle) = counts.spawn(|f| async move {
            let _f = f;
            1
        });
        let joiner = std::thread::spawn(move || futures::executor::block_on(handle));
        drop(runnable);
        assert_eq!(joiner.join().unwrap(), None);
        assert_eq!(Counts::get(&counts.future), 1);
        assert_eq!(Counts::get(&counts.freed), 1);
    }
}
