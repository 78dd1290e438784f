//! The blocking pool behind `spawn_blocking`: extra threads for code that would stall a worker.
//!
//! Threads are started on demand, one per queued task that no idle thread can take, up to a
//! bound; an idle thread exits after the keep-alive. Each blocking task is an async-task task
//! whose future calls the closure once, so it shares [`JoinHandle`] and panic capture with
//! ordinary tasks.

use crate::task::{self, JoinHandle, Runnable};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

pub(crate) struct BlockingPool {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    condvar: Condvar,
    thread_name: String,
    max_threads: usize,
    keep_alive: Duration,
}

struct State {
    queue: VecDeque<Runnable>,
    /// Threads alive (running a task or idle).
    threads: usize,
    /// Threads waiting for a task.
    idle: usize,
    shutdown: bool,
    next_id: usize,
    /// Join handles of live threads; a retiring thread removes (detaches) its own.
    handles: HashMap<usize, std::thread::JoinHandle<()>>,
}

impl BlockingPool {
    pub(crate) fn new(thread_name: String, max_threads: usize, keep_alive: Duration) -> Self {
        BlockingPool {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    threads: 0,
                    idle: 0,
                    shutdown: false,
                    next_id: 0,
                    handles: HashMap::new(),
                }),
                condvar: Condvar::new(),
                thread_name,
                max_threads,
                keep_alive,
            }),
        }
    }

    pub(crate) fn spawn<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let inner = self.inner.clone();
        let (runnable, task) = task::build(
            task::TaskHeader::new(),
            move || async move { f() },
            move |r| Inner::schedule(&inner, r),
        );
        runnable.schedule();
        JoinHandle::new(task)
    }

    /// (threads, queued tasks).
    pub(crate) fn stats(&self) -> (usize, usize) {
        let state = self.inner.state.lock().unwrap();
        (state.threads, state.queue.len())
    }

    /// Drops queued tasks (their handles resolve Cancelled), lets running ones finish, and joins
    /// every thread.
    pub(crate) fn shutdown(&self) {
        let (queued, handles) = {
            let mut state = self.inner.state.lock().unwrap();
            state.shutdown = true;
            let queued: Vec<_> = state.queue.drain(..).collect();
            let handles: Vec<_> = state.handles.drain().map(|(_, h)| h).collect();
            (queued, handles)
        };
        self.inner.condvar.notify_all();
        // Outside the lock: a dropped task's destructor may spawn more blocking work.
        drop(queued);
        let me = std::thread::current().id();
        for handle in handles {
            if handle.thread().id() != me {
                // The closure's panic was caught by CatchUnwind; a thread panic here would be a
                // bug in this file, and shutdown must go on regardless.
                let _ = handle.join();
            }
        }
    }
}

impl Inner {
    fn schedule(this: &Arc<Inner>, runnable: Runnable) {
        let mut state = this.state.lock().unwrap();
        if state.shutdown {
            drop(state);
            drop(runnable);
            return;
        }
        state.queue.push_back(runnable);
        if state.idle >= state.queue.len() {
            drop(state);
            this.condvar.notify_one();
        } else if state.threads < this.max_threads {
            let id = state.next_id;
            state.next_id += 1;
            state.threads += 1;
            let inner = this.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{}-{id}", this.thread_name))
                .spawn(move || inner.run(id));
            match spawned {
                Ok(handle) => {
                    state.handles.insert(id, handle);
                }
                Err(_) if state.threads > 1 => {
                    // Out of threads for now: an existing thread takes the task when it is free.
                    state.threads -= 1;
                }
                Err(e) => panic!("spawn_blocking could not start any blocking thread: {e}"),
            }
        }
        // Otherwise every thread is busy and the pool is at its bound: the task waits its turn.
    }

    fn run(&self, id: usize) {
        let mut state = self.state.lock().unwrap();
        loop {
            if let Some(runnable) = state.queue.pop_front() {
                drop(state);
                runnable.run();
                state = self.state.lock().unwrap();
                continue;
            }
            if state.shutdown {
                break;
            }
            state.idle += 1;
            let (guard, timeout) = self.condvar.wait_timeout(state, self.keep_alive).unwrap();
            state = guard;
            state.idle -= 1;
            if timeout.timed_out() && state.queue.is_empty() && !state.shutdown {
                // Retire: nobody needs this thread. Detach our own handle (we cannot join
                // ourselves); the thread ends right after.
                state.handles.remove(&id);
                break;
            }
        }
        state.threads -= 1;
    }
}
