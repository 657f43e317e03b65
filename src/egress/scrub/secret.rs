//! One secret as the scrubber knows it: every encoding of every fragment of it that counts
//! in one matcher, and the search for it through every decoding a script could make.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};

use super::blocks::{self, Block};
use super::budget::Meter;
use super::encode;
use super::escapes;
use super::normalize::{normalize, strip};

/// Decodings deep the search goes: a decoding of a decoding (percent-encoded HTML
/// references, base64 of JSON-escaped text), each ending in the matcher, which knows every
/// single encoding of the whole secret (base64 of base64 is one decoding and the matcher).
/// One of them at most is a block decoding, the costly kind (every run at every alignment).
const DEPTH: u32 = 2;

/// Bytes either side of an escape that a decoding is looked into, for each byte of the
/// secret: a rendering two decodings deep is at most this many times as long (`\\u0025`
/// percent-escaped is 24 bytes for one; HTML references may pad with zeros).
const REACH_PER_BYTE: usize = 32;

/// Needle bytes up to which the matcher is a DFA (fastest, but its table grows with them).
const MAX_DFA_NEEDLE_BYTES: usize = 64 * 1024;

/// JSON decodings of a text looked through one by one before it is parsed for scrubbing
/// (JSON in a string of JSON in a string...); deeper, every run of backslashes is read as
/// one, which undoes any depth at once.
const MAX_JSON_DECODINGS: usize = 8;

/// One scrub's search: the budget it charges, and the block runs it has decoded (a view of a
/// text, or its JSON decoding, shows most of the text's runs again: each is decoded once).
pub(super) struct Search<'a> {
    meter: Meter<'a>,
    /// Digests of the runs decoded and found clean, with the decodings deep they were
    /// looked into.
    decoded: RefCell<HashSet<(u64, u32)>>,
    /// Keyed at random: a provider cannot make one run pass for another.
    digest: RandomState,
}

impl<'a> Search<'a> {
    /// A search charging `meter`.
    pub fn new(meter: Meter<'a>) -> Self {
        Self {
            meter,
            decoded: RefCell::default(),
            digest: RandomState::new(),
        }
    }

    /// Whether `run` was found clean already as `block`, decoded at least `depth` deep.
    fn clean_before(&self, block: Block, run: &[u8], depth: u32) -> bool {
        let key = self.digest.hash_one((block, run));
        let decoded = self.decoded.borrow();
        (depth..=DEPTH).any(|d| decoded.contains(&(key, d)))
    }

    /// Notes that `run`, decoded as `block` `depth` deep, was clean.
    fn clean(&self, block: Block, run: &[u8], depth: u32) {
        let key = self.digest.hash_one((block, run));
        self.decoded.borrow_mut().insert((key, depth));
    }
}

/// A secret, ready to be found.
pub(super) struct Secret {
    /// Every encoding of every fragment that counts, ASCII case ignored (hex and percent
    /// escapes of either case, a secret upper-cased). `None` only if it could not be built,
    /// and then every text counts as carrying the secret.
    matcher: Option<AhoCorasick>,
    /// Bytes in the shortest fragment that counts: no shorter text can carry the secret.
    fragment: usize,
    /// Bytes in the shortest fragment looked for inside a block encoding nested in another
    /// encoding ([`encode::nested_chars`]).
    nested: usize,
    /// The secret is not ASCII: decoded bytes above ASCII may be text.
    wide: bool,
    /// Bytes either side of an escape that a decoding is looked into: room for the longest
    /// rendering the search finds that the escape could be part of.
    reach: usize,
    /// The secret looks escaped itself (`%41` in it): each kind of escape is undone apart,
    /// or undoing them all at once would change the secret too.
    apart: bool,
}

impl Secret {
    /// The needles of `secret` (at least `min_needle` bytes each) in one matcher; with
    /// `within`, the text the secret is sent in (`user:password`), every encoding of that
    /// whole too.
    pub fn new(secret: &str, within: Option<&str>, min_needle: usize) -> Self {
        let joined = normalize(secret.as_bytes());
        let joined = String::from_utf8_lossy(&joined).into_owned();
        // Every encoding of the secret, forwards and reversed (a provider may reverse it
        // before encoding it); the windows of its fragments that count as they are and in
        // block encodings (whose decodings are looked into once): an escaped fragment is
        // found by decoding (step 3), the whole secret is cut out wherever it stands.
        let reversed = |text: &str| text.chars().rev().collect::<String>();
        let windows: Vec<String> = encode::windows(&joined)
            .iter()
            .flat_map(|w| [w.clone(), reversed(w)])
            .collect();
        let blocks = windows.iter().flat_map(|w| encode::blocks(w));
        let wholes = std::iter::once(secret).chain(within);
        let mut needles: Vec<String> = wholes
            .flat_map(|whole| [whole.to_owned(), reversed(whole)])
            .flat_map(|whole| encode::encodings(&whole))
            .chain(windows.iter().cloned())
            .chain(blocks)
            .filter(|needle| needle.len() >= min_needle)
            .collect();
        let shortest = windows
            .iter()
            .map(String::len)
            .min()
            .unwrap_or(joined.len());
        // A nested block decoding looks for all but a few characters.
        let chars: Vec<char> = joined.chars().collect();
        let nested = chars
            .windows(encode::nested_chars(chars.len()).max(1))
            .map(|w| w.iter().map(|c| c.len_utf8()).sum::<usize>())
            .min()
            .unwrap_or(joined.len());
        needles.sort();
        needles.dedup();
        // A long secret's needles would make a large table: an automaton that stays small,
        // a little slower.
        let kind = if needles.iter().map(String::len).sum::<usize>() <= MAX_DFA_NEEDLE_BYTES {
            AhoCorasickKind::DFA
        } else {
            AhoCorasickKind::ContiguousNFA
        };
        let matcher = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(Some(kind))
            .build(&needles)
            .inspect_err(|error| {
                tracing::error!(%error, "cannot build the secret scrubber's matcher");
            })
            .ok();
        tracing::debug!(
            needles = needles.len(),
            bytes = matcher.as_ref().map(AhoCorasick::memory_usage),
            "the secret scrubber's matcher"
        );
        let looks_escaped = |text: &str| escapes::unescape_all(text.as_bytes()) != text.as_bytes();
        Self {
            matcher,
            fragment: shortest.max(1),
            nested: nested.max(1),
            reach: REACH_PER_BYTE * secret.len(),
            wide: !secret.is_ascii(),
            apart: looks_escaped(secret) || looks_escaped(&reversed(secret)),
        }
    }

    /// `text` with every stretch that needles cover replaced by `with` (overlapping needles
    /// merged: the windows of a fragment cover all of it).
    pub fn replace<'a>(&self, text: &'a str, with: &str) -> Cow<'a, str> {
        let Some(matcher) = self.matcher.as_ref().filter(|m| m.is_match(text)) else {
            return Cow::Borrowed(text);
        };
        // Overlapping matches come in the order they end: sorted by start, then merged.
        let mut found: Vec<std::ops::Range<usize>> = matcher
            .find_overlapping_iter(text)
            .map(|m| m.range())
            .collect();
        found.sort_by_key(|range| range.start);
        let mut covered: Vec<std::ops::Range<usize>> = Vec::new();
        for range in found {
            match covered.last_mut() {
                Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
                _ => covered.push(range),
            }
        }
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        for stretch in covered {
            // Needles are ASCII-case-insensitive bytes of UTF-8 text; a stretch may still end
            // inside a character of a text that is not the secret's: widen it to whole ones.
            let start = text.floor_char_boundary(stretch.start.max(copied));
            let end = text.ceil_char_boundary(stretch.end);
            out.push_str(&text[copied..start]);
            out.push_str(with);
            copied = end;
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }

    /// Whether `text` still shows the secret to [`Secret::carried`] once JSON-decoded (again
    /// while escapes remain: JSON inside JSON strings). Every string that parsing the
    /// text as JSON would decode is part of one of those decodings, so a text that shows
    /// nothing has nothing to scrub in its JSON. Past the budget counts as showing.
    pub fn shows(&self, text: &str, search: &Search) -> bool {
        let meter = search.meter;
        let text = text.as_bytes();
        if !meter.take(text.len()) {
            return true;
        }
        // JSON (or JavaScript) escapes are undone before anything else, at no cost in depth:
        // what the escaped text shows, its decoding shows too, unless the secret looks
        // escaped itself.
        let decoded = memchr::memchr(b'\\', text)
            .map(|_| escapes::backslash_unescape(text))
            .filter(|decoded| decoded != text);
        let Some(decoded) = decoded else {
            return self.carried(text, DEPTH, true, search);
        };
        if self.apart && self.carried(text, DEPTH, true, search) {
            return true;
        }
        // A block run right after a backslash that a decoding takes with its first
        // characters (`\b` of base64, octal `\266` of hex) is decoded as it came: a
        // script that leaves backslashes alone reads the whole run.
        for at in memchr::memchr_iter(b'\\', text) {
            if !text.get(at + 1).is_some_and(u8::is_ascii_alphanumeric) {
                continue;
            }
            let start = at + 1;
            let end = text[start..]
                .iter()
                .position(|b| !Block::ALL.iter().any(|k| k.class()[*b as usize]))
                .map_or(text.len(), |p| start + p);
            if end - start
                >= Block::Hex
                    .shortest(self.nested)
                    .min(Block::Base64.shortest(self.nested))
                && self.in_blocks(&text[start..end], DEPTH - 1, search)
            {
                return true;
            }
        }
        if self.carried(&decoded, DEPTH, true, search) {
            return true;
        }
        // Each further JSON decoding is looked into around what it changed: the rest is the
        // decoding before it, looked into already.
        let mut pieces = vec![decoded];
        for _ in 1..MAX_JSON_DECODINGS {
            let mut next = Vec::new();
            for piece in &pieces {
                for stretch in escapes::around(piece, b"\\", self.reach) {
                    let part = &piece[stretch];
                    if !meter.take(part.len()) {
                        return true;
                    }
                    let decoded = escapes::backslash_unescape(part);
                    if decoded == part {
                        continue;
                    }
                    if self.carried(&decoded, DEPTH, true, search) {
                        return true;
                    }
                    next.push(decoded);
                }
            }
            if next.is_empty() {
                return false;
            }
            pieces = next;
        }
        // Deeper still (or a long run of backslashes in ordinary text): every run of
        // backslashes read as one undoes any number of JSON encodings at once.
        pieces.iter().any(|piece| {
            // Charged before it is made: two passes over the piece.
            if !meter.take(2 * piece.len()) {
                return true;
            }
            let collapsed = escapes::backslash_unescape(&escapes::collapse_backslashes(piece));
            self.carried(&collapsed, DEPTH, true, search)
        })
    }

    /// Whether bytes that are not text (a file) carry the secret in any form: as they are,
    /// or through every decoding text is searched through. Past the budget they do.
    pub fn shows_in_bytes(&self, bytes: &[u8], search: &Search) -> bool {
        self.matcher.as_ref().is_some_and(|m| m.is_match(bytes))
            || self.carried(bytes, DEPTH, true, search)
    }

    /// Whether `raw`, decoded in any of the known ways (up to `depth` decodings deep, one of
    /// them a block decoding when `blocks`; each ending in the matcher), carries a fragment
    /// of the secret that counts. Past the budget it does: what is not checked is not let
    /// through.
    fn carried(&self, raw: &[u8], depth: u32, blocks: bool, search: &Search) -> bool {
        let meter = search.meter;
        if raw.len() < self.fragment {
            return false;
        }
        if !meter.take(raw.len()) {
            return true;
        }
        // Lines keep their breaks for the block runs, which go on across line breaks but not
        // across spaces; the matcher sees every white space dropped.
        let lines = strip(raw, true);
        let text = normalize(&lines);
        if self.matches(&text) {
            return true;
        }
        if depth == 0 {
            return false;
        }
        // Block runs first: a view shows most of them again, and finds them decoded as deep.
        if blocks && self.in_blocks(&lines, depth - 1, search) {
            return true;
        }
        // Each decoding is looked into around what it changed.
        escapes::around(&lines, escapes::MARKS, self.reach)
            .into_iter()
            .any(|stretch| {
                let part = &lines[stretch];
                // Each view reads the stretch, writes a view and compares it with the
                // stretch, whether or not it changed anything.
                let kinds = if self.apart { 4 } else { 1 };
                if !meter.take(part.len() * 2 * kinds) {
                    return true;
                }
                let joined = normalize(part);
                let mut views = escapes::views(part, &joined, self.apart);
                views.any(|view| {
                    !meter.take(view.len()) || self.carried(&view, depth - 1, blocks, search)
                })
            })
    }

    /// Whether a run of base64, base32 or hex in `text`, decoded at any alignment, holds text
    /// that carries the secret (decoded `depth` more times). The matcher has found every
    /// block encoding of the secret itself already: what is looked for here is one inside
    /// another encoding.
    fn in_blocks(&self, text: &[u8], depth: u32, search: &Search) -> bool {
        let meter = search.meter;
        for block in Block::ALL {
            let shortest = block.shortest(self.nested);
            for run in blocks::runs(text, block.class(), shortest) {
                if !meter.take(run.len()) {
                    return true;
                }
                if search.clean_before(block, run, depth) {
                    continue;
                }
                if !meter.take(run.len() * block.alignments()) {
                    return true;
                }
                let carried = block.decodings(run).any(|bytes| {
                    blocks::texts(&bytes, self.nested, self.wide)
                        .any(|stretch| self.carried(stretch, depth, false, search))
                });
                if carried {
                    return true;
                }
                search.clean(block, run, depth);
            }
        }
        false
    }

    /// The matcher's size, if it was built.
    #[cfg(test)]
    pub fn matcher_bytes(&self) -> Option<usize> {
        self.matcher.as_ref().map(AhoCorasick::memory_usage)
    }

    /// Whether the matcher finds a needle in `text` as it is.
    pub(super) fn matches(&self, text: &[u8]) -> bool {
        self.matcher.as_ref().is_none_or(|m| m.is_match(text))
    }
}
