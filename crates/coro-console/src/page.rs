//! The console's HTML page: one self-contained document (inline style and script, no external
//! assets) that renders `/tasks.json` and refreshes it every second.

/// The page served at `/`.
pub(crate) const HTML: &str = include_str!("page.html");
