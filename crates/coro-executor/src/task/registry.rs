//! Every task list of the process, for task snapshots: each pool's own list (registered when
//! the pool starts, forgotten once it is gone) and one list shared by the tasks of every other
//! executor (user executors, [`ManualExecutor`](crate::ManualExecutor), ...).

use super::list::TaskList;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The lists of live pools (dead ones are pruned as they are found).
static LISTS: Mutex<Vec<Weak<TaskList>>> = Mutex::new(Vec::new());

/// Makes `list` (a pool's) visible to [`for_each_list`] for as long as it lives.
pub(crate) fn register(list: &Arc<TaskList>) {
    let mut lists = LISTS.lock().unwrap();
    lists.retain(|l| l.strong_count() > 0);
    lists.push(Arc::downgrade(list));
}

/// The list of the tasks of every executor that keeps no list of its own: for snapshots only
/// (no shutdown walks it, so it holds no wakers and never keeps a task alive).
pub(crate) fn others() -> &'static TaskList {
    static OTHERS: OnceLock<TaskList> = OnceLock::new();
    OTHERS
        .get_or_init(|| TaskList::new(std::thread::available_parallelism().map_or(1, |n| n.get())))
}

/// Runs `f` on every task list alive: each registered one, then [`others`].
pub(crate) fn for_each_list(mut f: impl FnMut(&TaskList)) {
    // Upgraded under the lock, visited outside it: a visit waits for shard locks.
    let lists: Vec<Arc<TaskList>> = {
        let mut lists = LISTS.lock().unwrap();
        lists.retain(|l| l.strong_count() > 0);
        lists.iter().filter_map(Weak::upgrade).collect()
    };
    for list in lists {
        f(&list);
    }
    f(others());
}
