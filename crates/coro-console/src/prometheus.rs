//! The Prometheus text exposition (format 0.0.4) of a snapshot: per pool and per worker
//! counters and gauges, and the warnings by kind.
//!
//! Rule: every family is written with its `# HELP` and `# TYPE` lines once, then its samples;
//! label values are escaped as the format says (`\\`, `\"`, `\n`).

use coro::trace::{Snapshot, TaskState};
use std::fmt::Write;

/// A per-pool gauge's value.
type PoolGauge = fn(&coro::trace::PoolSnapshot) -> usize;
/// A per-worker sample's value.
type WorkerValue = fn(&coro::trace::WorkerSnapshot) -> f64;

/// The metrics text of `snap`.
pub(crate) fn render(snap: &Snapshot) -> String {
    let mut out = String::new();
    let pools = &snap.pools;
    family(
        &mut out,
        "coro_pool_tasks",
        "gauge",
        "Live tasks of the pool.",
        |out| {
            for pool in pools {
                sample(
                    out,
                    "coro_pool_tasks",
                    &[("pool", &pool.name)],
                    pool.tasks as f64,
                );
            }
        },
    );
    family(
        &mut out,
        "coro_tasks",
        "gauge",
        "Live tasks of every executor, by state.",
        |out| {
            for (state, label) in [
                (TaskState::Running, "running"),
                (TaskState::Scheduled, "scheduled"),
                (TaskState::Suspended, "suspended"),
            ] {
                let n = snap.tasks.iter().filter(|t| t.state == state).count();
                sample(out, "coro_tasks", &[("state", label)], n as f64);
            }
        },
    );
    family(
        &mut out,
        "coro_pool_busy_seconds",
        "gauge",
        "Time the pool's live tasks have spent inside polls, summed (counted while statistics are on).",
        |out| {
            for pool in pools {
                let busy: f64 = snap
                    .tasks
                    .iter()
                    .filter(|t| t.pool.as_deref() == Some(&*pool.name))
                    .map(|t| t.busy.as_secs_f64())
                    .sum();
                sample(out, "coro_pool_busy_seconds", &[("pool", &pool.name)], busy);
            }
        },
    );
    let gauges: [(&str, &str, PoolGauge); 4] = [
        (
            "coro_pool_global_queue_depth",
            "Tasks in the pool's global queue.",
            |p| p.global_queue,
        ),
        (
            "coro_pool_io_sources",
            "Sockets registered with the pool's IO driver.",
            |p| p.io_sources,
        ),
        (
            "coro_pool_timers",
            "Timers pending on the pool's timer wheel.",
            |p| p.timers,
        ),
        (
            "coro_pool_blocking_threads",
            "Threads of the pool's blocking pool.",
            |p| p.blocking_threads,
        ),
    ];
    for (name, help, get) in gauges {
        family(&mut out, name, "gauge", help, |out| {
            for pool in pools {
                sample(out, name, &[("pool", &pool.name)], get(pool) as f64);
            }
        });
    }
    let workers: [(&str, &str, &str, WorkerValue); 4] = [
        (
            "coro_worker_polls_total",
            "counter",
            "Polls the worker ran.",
            |w| w.polls as f64,
        ),
        (
            "coro_worker_parks_total",
            "counter",
            "Times the worker went to sleep.",
            |w| w.parks as f64,
        ),
        (
            "coro_worker_steals_total",
            "counter",
            "Tasks the worker stole from others.",
            |w| w.steals as f64,
        ),
        (
            "coro_worker_queue_depth",
            "gauge",
            "Tasks in the worker's local queue and next slot.",
            |w| w.queue as f64,
        ),
    ];
    for (name, kind, help, get) in workers {
        family(&mut out, name, kind, help, |out| {
            for pool in pools {
                for (i, worker) in pool.workers.iter().enumerate() {
                    let index = i.to_string();
                    sample(
                        out,
                        name,
                        &[("pool", &pool.name), ("worker", &index)],
                        get(worker),
                    );
                }
            }
        });
    }
    family(
        &mut out,
        "coro_warnings",
        "gauge",
        "Warnings in the current snapshot, by kind.",
        |out| {
            for kind in ["deadlock", "lost_wake", "long_poll", "starving"] {
                let n = snap.warnings.iter().filter(|w| w.kind() == kind).count();
                sample(out, "coro_warnings", &[("kind", kind)], n as f64);
            }
        },
    );
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: impl FnOnce(&mut String)) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    samples(out);
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (key, value)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{key}=\"{}\"", escape(value));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// A label value escaped for the text format.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn label_values_are_escaped() {
        assert_eq!(super::escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
