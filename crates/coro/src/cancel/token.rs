//! [`CancellationSource`], [`CancellationToken`] and merging.

use super::state::CancelState;
use std::fmt;
use std::sync::{Arc, Weak};

/// The side that requests cancellation (folly's `CancellationSource`).
///
/// Clones share one state: any of them can request cancellation, and the tokens they hand out
/// can be cancelled until every clone is dropped without requesting it.
///
/// ```
/// use coro::cancel::CancellationSource;
///
/// let source = CancellationSource::new();
/// let token = source.token();
/// assert!(!token.is_cancellation_requested());
/// assert!(source.request_cancellation()); // this call did it
/// assert!(!source.request_cancellation()); // already done
/// assert!(token.is_cancellation_requested());
/// ```
pub struct CancellationSource {
    state: Arc<CancelState>,
}

impl CancellationSource {
    /// A source that has not been cancelled.
    ///
    /// ```
    /// assert!(!coro::cancel::CancellationSource::new().is_cancellation_requested());
    /// ```
    pub fn new() -> Self {
        CancellationSource {
            state: CancelState::new_source(),
        }
    }

    /// A token that observes this source.
    ///
    /// ```
    /// let source = coro::cancel::CancellationSource::new();
    /// assert_eq!(source.token(), source.token());
    /// assert!(source.token().can_be_cancelled());
    /// ```
    pub fn token(&self) -> CancellationToken {
        CancellationToken {
            state: Some(self.state.clone()),
        }
    }

    /// Requests cancellation: runs every registered callback on this thread and wakes every
    /// `cancelled()` future. Returns true for the call that requested it, false if it was
    /// already requested.
    ///
    /// ```
    /// let source = coro::cancel::CancellationSource::new();
    /// assert!(source.request_cancellation());
    /// assert!(!source.clone().request_cancellation());
    /// ```
    pub fn request_cancellation(&self) -> bool {
        self.state.request()
    }

    /// Whether cancellation has been requested.
    ///
    /// ```
    /// let source = coro::cancel::CancellationSource::new();
    /// source.request_cancellation();
    /// assert!(source.is_cancellation_requested());
    /// ```
    pub fn is_cancellation_requested(&self) -> bool {
        self.state.is_cancellation_requested()
    }
}

impl Default for CancellationSource {
    fn default() -> Self {
        Self::new()
    }
}

impl Clone for CancellationSource {
    fn clone(&self) -> Self {
        self.state.add_source();
        CancellationSource {
            state: self.state.clone(),
        }
    }
}

impl CancellationSource {
    /// This source and `token` (one of its tokens) again, for a new use as if fresh, if
    /// nothing else observes the source (no other token, callback or waiter holds its state)
    /// and it was never cancelled; `None` (dropping both) otherwise. Collects recycle their
    /// own sources this way, with the token their children ran with: keeping the token saves
    /// a reference-count update at each end of every collect.
    pub(crate) fn into_reusable(
        self,
        token: CancellationToken,
    ) -> Option<(CancellationSource, CancellationToken)> {
        let ours = token
            .state
            .as_ref()
            .is_some_and(|t| Arc::ptr_eq(t, &self.state));
        // Exactly this source and this token hold the state: nobody else can make another
        // reference to it meanwhile, so the plain loads are exact.
        let unobserved = Arc::strong_count(&self.state) == 2 && Arc::weak_count(&self.state) == 0;
        (ours && unobserved && !self.state.is_cancellation_requested()).then_some((self, token))
    }
}

impl Drop for CancellationSource {
    fn drop(&mut self) {
        self.state.remove_source();
    }
}

impl fmt::Debug for CancellationSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancellationSource")
            .field(
                "is_cancellation_requested",
                &self.is_cancellation_requested(),
            )
            .finish()
    }
}

/// The side that observes cancellation (folly's `CancellationToken`).
///
/// Cheap to clone; equal when they observe the same state. [`CancellationToken::none`] (also
/// the `Default`) can never be cancelled and allocates nothing.
///
/// ```
/// use coro::cancel::{CancellationSource, CancellationToken};
///
/// let source = CancellationSource::new();
/// let token = source.token();
/// assert_ne!(token, CancellationToken::none());
/// assert!(!CancellationToken::none().can_be_cancelled());
/// ```
#[derive(Clone, Default)]
pub struct CancellationToken {
    pub(super) state: Option<Arc<CancelState>>,
}

impl CancellationToken {
    /// A token that is never cancelled.
    ///
    /// ```
    /// let none = coro::cancel::CancellationToken::none();
    /// assert!(!none.is_cancellation_requested());
    /// assert!(!none.can_be_cancelled());
    /// ```
    pub fn none() -> Self {
        CancellationToken { state: None }
    }

    /// Whether cancellation has been requested.
    ///
    /// ```
    /// let source = coro::cancel::CancellationSource::new();
    /// let token = source.token();
    /// source.request_cancellation();
    /// assert!(token.is_cancellation_requested());
    /// ```
    pub fn is_cancellation_requested(&self) -> bool {
        self.state
            .as_ref()
            .is_some_and(|s| s.is_cancellation_requested())
    }

    /// Whether cancellation can still be requested: false for [`none`](Self::none) and once
    /// every source is dropped without requesting it; true for good once it was requested.
    ///
    /// ```
    /// let source = coro::cancel::CancellationSource::new();
    /// let token = source.token();
    /// assert!(token.can_be_cancelled());
    /// drop(source);
    /// assert!(!token.can_be_cancelled());
    /// ```
    pub fn can_be_cancelled(&self) -> bool {
        self.state.as_ref().is_some_and(|s| s.can_be_cancelled())
    }

    /// A token cancelled as soon as any of `tokens` is (folly's `cancellation_token_merge`).
    ///
    /// Tokens that cannot be cancelled are ignored and duplicates count once, so merging one
    /// distinct token returns a token equal to it without allocating, and merging nothing
    /// returns [`none`](Self::none).
    ///
    /// ```
    /// use coro::cancel::{CancellationSource, CancellationToken};
    ///
    /// let (a, b) = (CancellationSource::new(), CancellationSource::new());
    /// assert_eq!(CancellationToken::merge([a.token(), CancellationToken::none()]), a.token());
    /// assert_eq!(CancellationToken::merge([a.token(), a.token()]), a.token());
    /// assert_eq!(CancellationToken::merge([]), CancellationToken::none());
    ///
    /// let both = CancellationToken::merge([a.token(), b.token()]);
    /// assert!(!both.is_cancellation_requested());
    /// b.request_cancellation();
    /// assert!(both.is_cancellation_requested());
    /// ```
    pub fn merge(tokens: impl IntoIterator<Item = CancellationToken>) -> CancellationToken {
        // The common merges (a collect's own token with a caller that has none, or the same
        // token twice) find one distinct token: no list is allocated for those.
        let mut tokens = tokens
            .into_iter()
            .filter(CancellationToken::can_be_cancelled);
        let Some(first) = tokens.next() else {
            return CancellationToken::none();
        };
        let mut distinct: Vec<CancellationToken> = Vec::new();
        for token in tokens {
            if token != first && !distinct.contains(&token) {
                distinct.push(token);
            }
        }
        if distinct.is_empty() {
            return first;
        }
        distinct.insert(0, first);
        let merged = CancelState::new_merged();
        let weak: Weak<CancelState> = Arc::downgrade(&merged);
        let inputs: Vec<Arc<CancelState>> = distinct
            .into_iter()
            .filter_map(|token| token.state)
            .collect();
        let forwarders = inputs
            .iter()
            .filter_map(|input| {
                let weak = weak.clone();
                input.register_callback(move || {
                    if let Some(merged) = weak.upgrade() {
                        merged.request();
                    }
                })
            })
            .collect();
        merged.set_inputs(inputs, forwarders);
        CancellationToken {
            state: Some(merged),
        }
    }
}

impl PartialEq for CancellationToken {
    fn eq(&self, other: &Self) -> bool {
        match (&self.state, &other.state) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for CancellationToken {}

impl fmt::Debug for CancellationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancellationToken")
            .field("can_be_cancelled", &self.can_be_cancelled())
            .field(
                "is_cancellation_requested",
                &self.is_cancellation_requested(),
            )
            .finish()
    }
}
