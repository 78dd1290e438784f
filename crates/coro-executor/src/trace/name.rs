//! A frame's name in two words instead of a `Cow<'static, str>`'s three.
//!
//! Every Task body and every spawned task carries a frame, and a frame is mostly its name: 8
//! bytes less per frame keep a small Task body in a smaller size class (a 1,000-level chain of
//! Tasks touches 16 KiB less) and a spawned task 8 bytes nearer the allocator's small-block
//! limit. Names are nearly always `&'static str` (a type name, or `Task::named("..")`); an owned
//! name is kept as a `Box<str>`, told apart by the top bit of the length, which no real length
//! reaches (allocations are at most `isize::MAX` bytes).

use std::borrow::Cow;
use std::ptr::NonNull;

/// The top bit of [`FrameName::len`]: the text is an owned `Box<str>`.
const OWNED: usize = 1 << (usize::BITS - 1);

/// `&'static str` or `Box<str>`, by the top bit of the length.
pub(super) struct FrameName {
    ptr: NonNull<u8>,
    /// The text's length, with [`OWNED`] set for a `Box<str>`.
    len: usize,
}

// SAFETY: a `FrameName` is either a `&'static str` or a `Box<str>` it owns; both are `Send` and
// `Sync`, and it offers only shared access to the text.
unsafe impl Send for FrameName {}
// SAFETY: shared, a `FrameName` only reads its text, a `&'static str` or a `Box<str>`, both
// `Sync`; nothing mutates it until its owner drops it.
unsafe impl Sync for FrameName {}

impl FrameName {
    #[inline]
    pub(super) fn new(name: Cow<'static, str>) -> FrameName {
        match name {
            Cow::Borrowed(text) => FrameName {
                ptr: NonNull::from(text).cast(),
                len: text.len(),
            },
            Cow::Owned(text) => FrameName::owned(text.into_boxed_str()),
        }
    }

    fn owned(text: Box<str>) -> FrameName {
        let len = text.len();
        FrameName {
            // SAFETY: `Box::into_raw` never returns null.
            ptr: unsafe { NonNull::new_unchecked(Box::into_raw(text).cast()) },
            len: len | OWNED,
        }
    }

    /// Whether the text is owned (not `&'static`).
    #[inline]
    pub(super) fn is_owned(&self) -> bool {
        self.len & OWNED != 0
    }

    #[inline]
    pub(super) fn as_str(&self) -> &str {
        // SAFETY: `ptr` and the length (without the tag) are those of a `str` that lives as long
        // as `self`: a `&'static str`, or the `Box<str>` that `self` owns.
        unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(
                self.ptr.as_ptr(),
                self.len & !OWNED,
            ))
        }
    }

    /// The name as a `Cow`: borrowed if static, else a copy of the text.
    pub(super) fn to_cow(&self) -> Cow<'static, str> {
        if self.is_owned() {
            Cow::Owned(self.as_str().to_owned())
        } else {
            // SAFETY: not owned, so `ptr` and `len` are those of a `&'static str`.
            Cow::Borrowed(unsafe {
                std::str::from_utf8_unchecked(std::slice::from_raw_parts(
                    self.ptr.as_ptr(),
                    self.len,
                ))
            })
        }
    }
}

impl Clone for FrameName {
    #[inline]
    fn clone(&self) -> FrameName {
        if self.is_owned() {
            FrameName::owned(self.as_str().into())
        } else {
            FrameName {
                ptr: self.ptr,
                len: self.len,
            }
        }
    }
}

impl Drop for FrameName {
    #[inline]
    fn drop(&mut self) {
        if self.is_owned() {
            let text = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len & !OWNED)
                as *mut str;
            // SAFETY: `text` is the pointer `Box::into_raw` gave `owned`, and `self` owned the
            // box alone; it is dropped once, here.
            drop(unsafe { Box::from_raw(text) });
        }
    }
}

impl PartialEq for FrameName {
    fn eq(&self, other: &FrameName) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for FrameName {}

#[cfg(all(test, not(loom), not(shuttle)))]
mod tests {
    use super::*;

    #[test]
    fn static_and_owned_names_keep_their_text_and_kind() {
        let fixed = FrameName::new(Cow::Borrowed("load_user"));
        let owned = FrameName::new(Cow::Owned(format!("shard-{}", 7)));
        assert_eq!((fixed.as_str(), fixed.is_owned()), ("load_user", false));
        assert_eq!((owned.as_str(), owned.is_owned()), ("shard-7", true));
        let copy = owned.clone();
        drop(owned);
        assert_eq!(copy.as_str(), "shard-7");
        assert!(matches!(copy.to_cow(), Cow::Owned(ref s) if s == "shard-7"));
        assert!(matches!(fixed.to_cow(), Cow::Borrowed("load_user")));
        assert!(FrameName::new(Cow::Borrowed("shard-7")) == copy);
        assert_eq!(std::mem::size_of::<FrameName>(), 16);
        assert_eq!(std::mem::size_of::<Option<FrameName>>(), 16);
    }
}
