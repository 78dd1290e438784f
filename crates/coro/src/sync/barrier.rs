//! [`Barrier`]: `n` tasks meet, then all go on; reusable, one generation after another.
//!
//! Arrivals are counted under a short mutex with the generation they belong to; the `n`-th
//! arrival starts the next generation and takes every registered waker, waking them after the
//! mutex is released. A waiter remembers its generation, so it completes once that generation
//! is over, however late it is polled.

use super::wakers::WakerSlab;
use coro_loom::sync::{Mutex, MutexGuard};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A meeting point for `n` tasks: each calls [`wait`](Barrier::wait), and all of them resume
/// once the `n`-th arrives (std's and tokio's `Barrier`, folly's `coro::Barrier`). It can be
/// used again: the next `n` waits form the next generation.
///
/// Cancel-safe: a wait dropped before its generation completed takes its arrival back, so the
/// barrier still needs `n` live arrivals. (One dropped after the generation completed has
/// passed the barrier.)
///
/// ```
/// use std::sync::Arc;
///
/// # coro::block_wait(async {
/// let barrier = Arc::new(coro::sync::Barrier::new(3));
/// let tasks: Vec<_> = (0..3)
///     .map(|_| {
///         let barrier = barrier.clone();
///         coro::spawn(async move { barrier.wait().await.is_leader() })
///     })
///     .collect();
/// let mut leaders = 0;
/// for task in tasks {
///     leaders += task.await.unwrap() as usize;
/// }
/// assert_eq!(leaders, 1); // exactly one waiter of each generation is told it was last
/// # });
/// ```
pub struct Barrier {
    n: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    generation: u64,
    arrived: usize,
    wakers: WakerSlab,
}

impl Barrier {
    /// A barrier for `n` tasks. `n` of 0 or 1 lets every wait through at once.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// assert!(coro::sync::Barrier::new(1).wait().await.is_leader());
    /// # });
    /// ```
    pub fn new(n: usize) -> Barrier {
        Barrier {
            n,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Only counters and wakers live here, changed by short sections.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Arrives and waits for the rest of this generation.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let barrier = coro::sync::Barrier::new(2);
    /// let (a, b) = futures::join!(barrier.wait(), barrier.wait());
    /// assert!(a.is_leader() != b.is_leader());
    /// # });
    /// ```
    pub fn wait(&self) -> BarrierWait<'_> {
        BarrierWait {
            barrier: self,
            registered: None,
            done: false,
        }
    }
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("Barrier")
            .field("n", &self.n)
            .field("arrived", &state.arrived)
            .finish()
    }
}

/// What a [`Barrier`] wait tells its task.
///
/// ```
/// # coro::block_wait(async {
/// let result: coro::sync::BarrierWaitResult = coro::sync::Barrier::new(1).wait().await;
/// assert!(result.is_leader());
/// # });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BarrierWaitResult {
    leader: bool,
}

impl BarrierWaitResult {
    /// Whether this wait was the last arrival of its generation (exactly one per generation).
    ///
    /// ```
    /// # coro::block_wait(async {
    /// assert!(coro::sync::Barrier::new(0).wait().await.is_leader());
    /// # });
    /// ```
    pub fn is_leader(&self) -> bool {
        self.leader
    }
}

/// The future returned by [`Barrier::wait`].
///
/// ```
/// let barrier = coro::sync::Barrier::new(1);
/// let wait: coro::sync::BarrierWait<'_> = barrier.wait();
/// assert!(coro::block_wait(wait).is_leader());
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct BarrierWait<'a> {
    barrier: &'a Barrier,
    /// The generation it arrived in and its waker slot.
    registered: Option<(u64, usize)>,
    done: bool,
}

impl Future for BarrierWait<'_> {
    type Output = BarrierWaitResult;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<BarrierWaitResult> {
        assert!(
            !self.done,
            "a coro::sync::Barrier wait was polled after it completed"
        );
        let barrier = self.barrier;
        let mut state = barrier.lock();
        match self.registered {
            Some((generation, _)) if generation != state.generation => {
                // The generation completed (and took our waker).
                drop(state);
                self.registered = None;
                self.done = true;
                Poll::Ready(BarrierWaitResult { leader: false })
            }
            Some((generation, index)) => {
                let mut slot = Some(index);
                state.wakers.register(&mut slot, cx.waker());
                self.registered = slot.map(|index| (generation, index));
                Poll::Pending
            }
            None if state.arrived + 1 >= barrier.n => {
                state.arrived = 0;
                state.generation += 1;
                let wakers = state.wakers.take();
                drop(state);
                wakers.wake_all();
                self.done = true;
                Poll::Ready(BarrierWaitResult { leader: true })
            }
            None => {
                let mut slot = None;
                state.wakers.register(&mut slot, cx.waker());
                state.arrived += 1;
                let generation = state.generation;
                self.registered = slot.map(|index| (generation, index));
                Poll::Pending
            }
        }
    }
}

impl Drop for BarrierWait<'_> {
    fn drop(&mut self) {
        if let Some((generation, index)) = self.registered {
            let mut state = self.barrier.lock();
            // Still waiting: take the arrival back. (After the generation completed, the
            // slab was taken and the slot is void.)
            if state.generation == generation {
                state.arrived -= 1;
                state.wakers.remove(index);
            }
        }
    }
}

impl fmt::Debug for BarrierWait<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BarrierWait")
            .field("arrived", &self.registered.is_some())
            .finish()
    }
}
