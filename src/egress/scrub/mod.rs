//! Keeping the provider secret out of everything a script or a client sees.
//!
//! A provider may echo the credential back in any rendering a script can turn back into it:
//! plainly, JSON- or JavaScript-escaped, percent-encoded, quoted-printable, as HTML
//! references (any HTML5 name, numbers with leading zeros), in base64, base32 or hex at any
//! alignment, in UTF-16 or UTF-32, reversed, wrapped across lines, with invisible
//! characters in it, or cut into pieces ([`encode::counting`]: ten characters of its
//! secret part count, a piece of a secret gives part of it away, and of a short secret all
//! but a few characters give the rest, which can be guessed; a fragment is looked for two
//! characters shorter, since a backslash before it may take one or two along). A block run
//! right after a backslash that takes its first characters is decoded as it came too.
//! Whatever reaches the isolate
//! the script can decode past any later check, so every string that enters it, and
//! everything in an execution's outcome, passes [`Scrubber::scrub`]:
//!
//! 1. every encoding of the secret, and every fragment that counts as it is or in a block
//!    encoding, is replaced with `[redacted]`, in one pass of one multi-pattern matcher
//!    (ASCII case ignored); an escaped fragment is left to step 3;
//! 2. text that is JSON with escapes in it is parsed, every string and key is scrubbed after
//!    decoding, and it is written back;
//! 3. what is left is searched through every decoding above, two deep (a decoding of a
//!    decoding, each ending in the matcher): line wraps and invisible characters dropped,
//!    escapes undone, block encodings decoded at every alignment. If a fragment that counts
//!    is still in there, in a mixture no needle matched, the whole text is withheld.
//!
//! Each pass over bytes is charged to the execution's [`Budget`] first; when it is spent or
//! the execution has ended, checking stops and the text is withheld as unchecked.
//!
//! What no scrubber can catch is a provider that transforms the key in a way of its own
//! (encrypts it, cuts it into pieces shorter than those within one reply or across several,
//! encodes it three times): a provider that hostile is out of reach;
//! ARCHITECTURE.md says so.

mod blocks;
mod budget;
mod encode;
mod escapes;
mod inflate;
mod normalize;
mod secret;

use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use budget::Budget;
use budget::Meter;
pub use budget::WORK_PER_RECEIVED_BYTE;
use secret::{Search, Secret};

/// What replaces the secret.
pub const REDACTED: &str = "[redacted]";

/// What replaces a text that carries the secret in a form that could not be cut out.
pub const WITHHELD: &str = "[withheld by sdkbox: this text carried the provider credential \
                            in an encoded form]";

/// What replaces a text that was not checked: its execution had ended or spent its budget.
pub const UNCHECKED: &str = "[withheld by sdkbox: not checked for the provider credential, \
                             the execution's checking budget was spent]";

/// Secrets shorter than this are not scrubbed: they cannot be told apart from ordinary text.
const MIN_SECRET: usize = 4;

/// Replaces every known form of one secret. Cheap to clone; without a secret it changes
/// nothing.
#[derive(Clone, Default)]
pub struct Scrubber {
    secret: Option<Arc<Secret>>,
    budget: Option<Arc<Budget>>,
}

impl Scrubber {
    /// A scrubber for `secret`, without a budget.
    pub fn for_secret(secret: &str) -> Self {
        Self::for_secret_within(secret, None)
    }

    /// A scrubber for `secret`, sent inside `within` (the password of `user:password`):
    /// its fragments count, and every encoding of `within` whole is cut out too.
    pub fn for_secret_within(secret: &str, within: Option<&str>) -> Self {
        // A part too short to tell from ordinary text: the whole it is sent in stands for it.
        let (secret, within) = match within {
            Some(whole) if secret.len() < MIN_SECRET => (whole, None),
            _ => (secret, within),
        };
        if secret.len() < MIN_SECRET {
            return Self::default();
        }
        Self {
            secret: Some(Arc::new(Secret::new(secret, within, MIN_SECRET))),
            budget: None,
        }
    }

    /// The same scrubber for one execution: at most `bytes` of checking in all, none once
    /// `ended` is cancelled.
    pub fn bounded(&self, bytes: usize, ended: CancellationToken) -> Self {
        Self {
            secret: self.secret.clone(),
            budget: Some(Arc::new(Budget::new(bytes, ended))),
        }
    }

    /// The budget's whole allowance, when checking has stopped for it: what was not checked
    /// has been withheld.
    pub fn spent(&self) -> Option<usize> {
        let budget = self.budget.as_ref().filter(|b| b.spent())?;
        self.secret.is_some().then(|| budget.total())
    }

    /// What checking has cost so far, in bytes looked at, when bounded: for the scrubber's
    /// benchmark.
    pub fn used(&self) -> Option<usize> {
        self.budget.as_ref().map(|b| b.used())
    }

    fn meter(&self) -> Meter<'_> {
        Meter(self.budget.as_deref())
    }

    /// `text` with every form of the secret replaced, or withheld whole.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(secret) = &self.secret else {
            return Cow::Borrowed(text);
        };
        let meter = self.meter();
        if !meter.take(text.len()) {
            return Cow::Owned(UNCHECKED.to_owned());
        }
        let search = Search::new(meter);
        let mut out = secret.replace(text, REDACTED);
        // Step 2 parses the whole text: it runs only when the text shows the secret in some
        // form, as it is or JSON-decoded. A text clean every way is done, without parsing
        // megabytes of JSON.
        let replaced = matches!(out, Cow::Owned(_));
        // What the text shows as it stands, when the replacement left it as it came.
        let mut shows = (!replaced).then(|| secret.shows(&out, &search));
        if shows == Some(false) {
            return out;
        }
        // JSON with escapes is scrubbed string by string as it came, each string decoded:
        // a needle that matched its escaped text may have taken only part of the secret.
        if text.contains('\\')
            && meter.take(text.len())
            && let Some(clean) = self.scrub_json_text(text)
        {
            out = Cow::Owned(clean);
            shows = None;
        }
        // Still showing it (a mixture, or escapes in text that is not JSON): withheld. A
        // text unchanged since it was searched is not searched again.
        if shows.unwrap_or_else(|| secret.shows(&out, &search)) {
            let withheld = if meter.spent() { UNCHECKED } else { WITHHELD };
            return Cow::Owned(withheld.to_owned());
        }
        out
    }

    /// Why bytes that are not text (a file) cannot be handed over, or `None` when they
    /// carry the secret in no form and can go as they are. Bytes are withheld whole, never
    /// cut into: a file with a piece replaced is another file.
    pub fn binary_shows_secret(&self, bytes: &[u8]) -> Option<&'static str> {
        let secret = self.secret.as_ref()?;
        let meter = self.meter();
        if !meter.take(bytes.len()) {
            return Some(UNCHECKED);
        }
        let search = Search::new(meter);
        // Compressed bytes (gzip, zlib, the deflated entries of a zip archive) are looked
        // into inflated too, each inflated byte charged to the budget.
        let shows = secret.shows_in_bytes(bytes, &search)
            || inflate::any_view(bytes, meter, &|inflated| {
                secret.shows_in_bytes(inflated, &search)
            });
        if !shows && !meter.spent() {
            return None;
        }
        Some(if meter.spent() { UNCHECKED } else { WITHHELD })
    }

    /// Scrubs every string and key inside a JSON value, in place.
    pub fn scrub_json(&self, value: &mut Value) {
        if self.secret.is_some() {
            self.scrub_value(value);
        }
    }

    /// `value` with every string in it scrubbed, whatever its type: the one way a response
    /// enters the isolate and an outcome leaves egress, so that no field can be forgotten.
    /// A value that does not survive the round trip is replaced by `fallback`.
    pub fn scrub_all<T: Serialize + DeserializeOwned>(&self, value: T, fallback: T) -> T {
        if self.secret.is_none() {
            return value;
        }
        let Ok(mut json) = serde_json::to_value(&value) else {
            return fallback;
        };
        self.scrub_value(&mut json);
        serde_json::from_value(json).unwrap_or(fallback)
    }

    /// Scrubs in place; true when anything changed.
    fn scrub_value(&self, value: &mut Value) -> bool {
        match value {
            Value::String(s) => match self.scrub(s) {
                Cow::Owned(clean) => {
                    *s = clean;
                    true
                }
                Cow::Borrowed(_) => false,
            },
            Value::Array(items) => {
                let mut changed = false;
                for item in items {
                    changed |= self.scrub_value(item);
                }
                changed
            }
            Value::Object(map) => {
                let entries = std::mem::take(map);
                let mut changed = false;
                for (key, mut v) in entries {
                    changed |= self.scrub_value(&mut v);
                    let clean = self.scrub(&key);
                    changed |= matches!(clean, Cow::Owned(_));
                    map.insert(clean.into_owned(), v);
                }
                changed
            }
            _ => false,
        }
    }

    /// JSON text with escapes, scrubbed after decoding and written back; `None` when it is
    /// not JSON or nothing changed.
    fn scrub_json_text(&self, text: &str) -> Option<String> {
        let start = text.trim_start().as_bytes().first()?;
        if !matches!(start, b'{' | b'[' | b'"') {
            return None;
        }
        let mut value: Value = serde_json::from_str(text).ok()?;
        self.scrub_value(&mut value)
            .then(|| serde_json::to_string(&value).ok())
            .flatten()
    }
}

#[cfg(test)]
mod tests;
