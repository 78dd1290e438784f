//! [`Frame`]: one frame of an async stack (a name and a source location), and how a stack of
//! them is fingerprinted.

use super::*;

/// One frame of an async stack: a name and the source location it stands for.
///
/// ```
/// use coro_executor::trace::Frame;
///
/// let frame = Frame::new("load_user", std::panic::Location::caller());
/// assert_eq!(frame.name(), "load_user");
/// assert!(frame.to_string().starts_with("load_user ("));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Frame {
    pub(super) name: FrameName,
    pub(super) location: &'static Location<'static>,
}

impl Frame {
    /// A frame named `name` at `location`.
    ///
    /// ```
    /// let frame = coro_executor::trace::Frame::new(String::from("dynamic"), std::panic::Location::caller());
    /// assert_eq!(frame.name(), "dynamic");
    /// ```
    pub fn new(name: impl Into<Cow<'static, str>>, location: &'static Location<'static>) -> Self {
        Frame {
            name: FrameName::new(name.into()),
            location,
        }
    }

    /// The frame's name (for a task: set with `Task::named`, or the type of its future).
    ///
    /// ```
    /// let frame = coro_executor::trace::Frame::new("f", std::panic::Location::caller());
    /// assert_eq!(frame.name(), "f");
    /// ```
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// Where the frame's task was created.
    ///
    /// ```
    /// let here = std::panic::Location::caller();
    /// assert_eq!(coro_executor::trace::Frame::new("f", here).location(), here);
    /// ```
    pub fn location(&self) -> &'static Location<'static> {
        self.location
    }

    /// Mixes what the frame shows (its name and location) into `hash`, so that a stack can be
    /// recognised as the one already published without copying it: equal frames always mix
    /// equally, different ones almost never do. A name that is a `&'static str` is mixed by
    /// address and length (static text cannot change); an owned one by its text, since
    /// another name may later be allocated at the same address.
    ///
    /// ```
    /// use coro_executor::trace::Frame;
    ///
    /// let here = std::panic::Location::caller();
    /// let a = Frame::new(String::from("load"), here);
    /// let b = Frame::new(String::from("load"), here);
    /// let c = Frame::new(String::from("save"), here);
    /// assert_eq!(a.mix_into(1), b.mix_into(1));
    /// assert_ne!(a.mix_into(1), c.mix_into(1));
    /// ```
    #[inline]
    pub fn mix_into(&self, hash: u64) -> u64 {
        let mut hash = mix(hash, ptr::from_ref(self.location) as usize as u64);
        let name = self.name.as_str();
        if self.name.is_owned() {
            for chunk in name.as_bytes().chunks(8) {
                let mut word = [0; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                hash = mix(hash, u64::from_le_bytes(word));
            }
        } else {
            hash = mix(hash, name.as_ptr() as usize as u64);
        }
        mix(hash, name.len() as u64)
    }

    /// Renames the frame.
    ///
    /// ```
    /// let mut frame = coro_executor::trace::Frame::new("a", std::panic::Location::caller());
    /// frame.set_name("b");
    /// assert_eq!(frame.name(), "b");
    /// ```
    pub fn set_name(&mut self, name: impl Into<Cow<'static, str>>) {
        self.name = FrameName::new(name.into());
    }
}

/// One FNV-1a step on a whole word.
#[inline]
fn mix(hash: u64, word: u64) -> u64 {
    (hash ^ word).wrapping_mul(0x0100_0000_01b3)
}

impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}:{})",
            self.name.as_str(),
            self.location.file(),
            self.location.line()
        )
    }
}

impl fmt::Debug for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
