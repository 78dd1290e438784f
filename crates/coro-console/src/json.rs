//! [`JsonBody`]: a snapshot as JSON, streamed a batch of tasks per frame, so that a snapshot
//! of many tasks is never one buffer of its whole text. The snapshot is a copy: writing it
//! holds no lock the workers need.

use coro::trace::Snapshot;
use hyper::body::{Body, Bytes, Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Tasks per frame.
const BATCH: usize = 512;

/// The streamed JSON of one snapshot.
pub(crate) struct JsonBody {
    snapshot: Snapshot,
    /// The next task to write; `None` before the head is written.
    next: Option<usize>,
    done: bool,
}

impl JsonBody {
    pub(crate) fn new(snapshot: Snapshot) -> JsonBody {
        JsonBody {
            snapshot,
            next: None,
            done: false,
        }
    }

    /// The next piece of text, or `None` at the end.
    fn next_chunk(&mut self) -> Option<Vec<u8>> {
        if self.done {
            return None;
        }
        let snap = &self.snapshot;
        let mut out = Vec::with_capacity(64 * 1024);
        let Some(next) = self.next else {
            // Everything but the tasks first (small), then the tasks array.
            out.extend_from_slice(b"{\"taken_at\":");
            let taken = snap
                .taken_at
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64();
            serde_json::to_writer(&mut out, &taken).expect("a number serialises");
            out.extend_from_slice(b",\"pools\":");
            serde_json::to_writer(&mut out, &snap.pools).expect("pools serialise");
            out.extend_from_slice(b",\"warnings\":");
            serde_json::to_writer(&mut out, &snap.warnings).expect("warnings serialise");
            out.extend_from_slice(b",\"tasks\":[");
            self.next = Some(0);
            return Some(out);
        };
        let end = (next + BATCH).min(snap.tasks.len());
        for (i, task) in snap.tasks[next..end].iter().enumerate() {
            if next + i > 0 {
                out.push(b',');
            }
            serde_json::to_writer(&mut out, task).expect("a task serialises");
        }
        if end == snap.tasks.len() {
            out.extend_from_slice(b"]}");
            self.done = true;
        }
        self.next = Some(end);
        Some(out)
    }
}

impl Body for JsonBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        Poll::Ready(
            this.next_chunk()
                .map(|chunk| Ok(Frame::data(Bytes::from(chunk)))),
        )
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_streamed_text_is_the_snapshot_as_json() {
        let snapshot = coro::trace::snapshot();
        let tasks = snapshot.tasks.len();
        let mut body = super::JsonBody::new(snapshot);
        let mut text = Vec::new();
        while let Some(chunk) = body.next_chunk() {
            text.extend(chunk);
        }
        let value: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(value["tasks"].as_array().unwrap().len(), tasks);
        assert!(value["pools"].is_array() && value["warnings"].is_array());
    }
}
