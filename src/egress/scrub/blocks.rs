//! Block encodings a script can decode: runs of base64 (either alphabet), base32 (either
//! RFC 4648 alphabet, either case) and hex, at every alignment.

use std::sync::LazyLock;

use base64::Engine;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use super::escapes::hex_value;

/// An encoding of bytes into runs of characters, whose runs the scrubber decodes.
#[derive(Clone, Copy, Debug, Hash)]
pub enum Block {
    /// Base64, the standard and URL alphabets alike (a script maps one onto the other).
    Base64,
    /// Base32 of RFC 4648, either case.
    Base32,
    /// Base32 of RFC 4648's extended hex alphabet, either case.
    Base32Hex,
    /// Hex, either case, maybe with `:`, `-` or space between bytes (`73:6b:...`).
    Hex,
}

impl Block {
    /// Every block encoding looked through.
    pub const ALL: [Block; 4] = [Block::Base64, Block::Base32, Block::Base32Hex, Block::Hex];

    /// The bytes a run of this encoding goes on across (padding and line wraps included).
    pub fn class(self) -> &'static [bool; 256] {
        match self {
            Block::Base64 => &BASE64_RUN,
            Block::Base32 => &BASE32_RUN,
            Block::Base32Hex => &BASE32HEX_RUN,
            Block::Hex => &HEX_RUN,
        }
    }

    /// The characters a run needs to hold `bytes` bytes of data.
    pub fn shortest(self, bytes: usize) -> usize {
        match self {
            Block::Base64 => (bytes * 4).div_ceil(3),
            Block::Base32 | Block::Base32Hex => (bytes * 8).div_ceil(5),
            Block::Hex => bytes * 2,
        }
    }

    /// The alignments a run is decoded at: the secret may start at any character of a
    /// group.
    pub fn alignments(self) -> usize {
        match self {
            Block::Base64 => 4,
            Block::Base32 | Block::Base32Hex => 8,
            Block::Hex => 2,
        }
    }

    /// `run` decoded at every alignment (what would not decode at one is skipped).
    pub fn decodings(self, run: &[u8]) -> impl Iterator<Item = Vec<u8>> {
        let digits: Vec<u8> = run
            .iter()
            .filter(|b| self.is_digit(**b))
            .map(|b| match (self, b) {
                (Block::Base64, b'-') => b'+',
                (Block::Base64, b'_') => b'/',
                (Block::Base32 | Block::Base32Hex, b) => b.to_ascii_uppercase(),
                (_, b) => *b,
            })
            .collect();
        (0..self.alignments()).filter_map(move |offset| {
            let tail = digits.get(offset..)?;
            // A last group cut short still decodes to its whole bytes.
            let usable = match (self, tail.len() % 8) {
                (Block::Base64, _) if tail.len() % 4 == 1 => &tail[..tail.len() - 1],
                (Block::Base32 | Block::Base32Hex, 1 | 3 | 6) => &tail[..tail.len() - 1],
                (Block::Hex, _) => &tail[..tail.len() - tail.len() % 2],
                _ => tail,
            };
            match self {
                Block::Base64 => LAX_BASE64.decode(usable).ok(),
                Block::Base32 => LAX_BASE32.decode(usable).ok(),
                Block::Base32Hex => LAX_BASE32HEX.decode(usable).ok(),
                Block::Hex => Some(hex_decode(usable)),
            }
        })
    }

    /// Whether `b` is a digit of this encoding (not padding, a wrap or a separator).
    fn is_digit(self, b: u8) -> bool {
        match self {
            Block::Base64 => b.is_ascii_alphanumeric() || b"+/-_".contains(&b),
            Block::Base32 => b.is_ascii_alphabetic() || (b'2'..=b'7').contains(&b),
            Block::Base32Hex => {
                b.is_ascii_digit() || (b'a'..=b'v').contains(&b.to_ascii_lowercase())
            }
            Block::Hex => b.is_ascii_hexdigit(),
        }
    }
}

/// Base64 as a script's decoder takes it: no padding, the bits after the last byte ignored.
static LAX_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone),
);

/// Base32 the same way.
static LAX_BASE32: LazyLock<data_encoding::Encoding> =
    LazyLock::new(|| lax_base32("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"));

/// Base32 of the extended hex alphabet the same way.
static LAX_BASE32HEX: LazyLock<data_encoding::Encoding> =
    LazyLock::new(|| lax_base32("0123456789ABCDEFGHIJKLMNOPQRSTUV"));

fn lax_base32(symbols: &str) -> data_encoding::Encoding {
    let mut spec = data_encoding::Specification::new();
    spec.symbols.push_str(symbols);
    spec.check_trailing_bits = false;
    // Thirty-two distinct ASCII symbols and no padding: a valid specification.
    spec.encoding()
        .unwrap_or_else(|_| data_encoding::BASE32_NOPAD.clone())
}

fn hex_decode(digits: &[u8]) -> Vec<u8> {
    digits
        .chunks_exact(2)
        .filter_map(|pair| Some(hex_value(pair[0])? << 4 | hex_value(pair[1])?))
        .collect()
}

/// Bytes a base64 run goes on across: either alphabet, padding, and line breaks (MIME and
/// PEM wrap it in lines). Not spaces: prose would be one run, decoded at every alignment.
static BASE64_RUN: [bool; 256] =
    byte_class(&[(b'A', b'Z'), (b'a', b'z'), (b'0', b'9')], b"+/-_=\n\r");

/// Bytes a base32 run goes on across.
static BASE32_RUN: [bool; 256] = byte_class(&[(b'A', b'Z'), (b'a', b'z'), (b'2', b'7')], b"=\n\r");

/// Bytes a base32hex run goes on across.
static BASE32HEX_RUN: [bool; 256] =
    byte_class(&[(b'0', b'9'), (b'A', b'V'), (b'a', b'v')], b"=\n\r");

/// Bytes a hex run goes on across: digits, line breaks, and the separators of `73:6b:...`.
static HEX_RUN: [bool; 256] = byte_class(&[(b'0', b'9'), (b'a', b'f'), (b'A', b'F')], b":- \n\r");

/// A lookup table of bytes: those in the inclusive `ranges`, and `extra`.
pub(super) const fn byte_class(ranges: &[(u8, u8)], extra: &[u8]) -> [bool; 256] {
    let mut table = [false; 256];
    let mut r = 0;
    while r < ranges.len() {
        let (mut b, last) = (ranges[r].0 as usize, ranges[r].1 as usize);
        while b <= last {
            table[b] = true;
            b += 1;
        }
        r += 1;
    }
    let mut i = 0;
    while i < extra.len() {
        table[extra[i] as usize] = true;
        i += 1;
    }
    table
}

/// The maximal runs of bytes in `class`, at least `shortest` long. Such a run covers one of
/// every `shortest`-th byte, so only those are looked at until one is in the class: a text
/// of short runs (words, ids) is crossed `shortest` bytes at a time.
pub fn runs<'a>(
    text: &'a [u8],
    class: &'a [bool; 256],
    shortest: usize,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    let shortest = shortest.max(1);
    let within = move |i: usize| class[text[i] as usize];
    let mut probe = shortest - 1;
    std::iter::from_fn(move || {
        while probe < text.len() {
            if !within(probe) {
                probe += shortest;
                continue;
            }
            let mut start = probe;
            while start > 0 && within(start - 1) {
                start -= 1;
            }
            let mut end = probe + 1;
            while end < text.len() && within(end) {
                end += 1;
            }
            // The next run starts after `end`, which is not in the class.
            probe = end + shortest;
            if end - start >= shortest {
                return Some(&text[start..end]);
            }
        }
        None
    })
}

/// The stretches of decoded bytes that could be text, at least `shortest` bytes long:
/// printable ASCII, tabs, line breaks and NULs (UTF-16 and UTF-32 of ASCII), and the bytes
/// of the invisible characters a script drops; with `wide` (a secret that is not ASCII),
/// every byte above ASCII. Only text can hold a rendering to decode further, and what a
/// block decoding gives at a wrong alignment is rarely text for long, so this is found by
/// the striding of [`runs`].
pub fn texts(bytes: &[u8], shortest: usize, wide: bool) -> impl Iterator<Item = &[u8]> {
    runs(bytes, if wide { &WIDE_TEXT } else { &TEXT }, shortest)
}

/// Bytes [`texts`] keeps for an ASCII secret.
static TEXT: [bool; 256] = byte_class(
    &[(0x20, 0x7e), (0x80, 0xbf)],
    b"\t\n\r\0\xc2\xcd\xd8\xe1\xe2\xe3\xef\xf0\xf3",
);

/// Bytes [`texts`] keeps for a secret that is not ASCII.
static WIDE_TEXT: [bool; 256] = byte_class(&[(0x20, 0x7e), (0x80, 0xff)], b"\t\n\r\0");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_the_long_stretches_of_printable_bytes() {
        let bytes = "ab\u{1}\u{2}ca\u{200b}f \0x\u{7f}long enough\u{1b}\u{e9}t\u{e9}".as_bytes();
        let found: Vec<&[u8]> = texts(bytes, 4, false).collect();
        assert_eq!(found, [&b"ca\xe2\x80\x8bf \0x"[..], b"long enough"]);
        let wide: Vec<&[u8]> = texts(bytes, 4, true).collect();
        assert_eq!(wide.last(), Some(&"\u{e9}t\u{e9}".as_bytes()));
    }

    #[test]
    fn block_runs_decode_at_every_alignment() {
        let secret = b"sk_test_0123456789";
        for prefix in 0..10 {
            let mut data = vec![b'x'; prefix];
            data.extend_from_slice(secret);
            let encoded = [
                (
                    Block::Base64,
                    base64::engine::general_purpose::URL_SAFE.encode(&data),
                ),
                (
                    Block::Base32,
                    data_encoding::BASE32.encode(&data).to_lowercase(),
                ),
                (Block::Base32Hex, data_encoding::BASE32HEX.encode(&data)),
                (Block::Hex, crate::hex::hex(&data)),
            ];
            for (block, text) in encoded {
                // Any characters before it, and a line wrap inside it.
                let text = format!("ab{}\n{}", &text[..5], &text[5..]);
                let found = (0..3).any(|skip| {
                    block
                        .decodings(&text.as_bytes()[skip..])
                        .any(|bytes| memchr::memmem::find(&bytes, secret).is_some())
                });
                assert!(found, "{block:?} with {prefix} bytes before: {text}");
            }
        }
    }

    proptest::proptest! {
        /// Runs found by striding are exactly the maximal runs a byte-by-byte split finds.
        #[test]
        fn runs_are_every_maximal_run_long_enough(
            text in proptest::collection::vec(proptest::sample::select(b"ab0f:- _=+/\n\"{}xyz28\0".to_vec()), 0..400),
            shortest in 1usize..50,
        ) {
            for block in Block::ALL {
                let class = block.class();
                let naive: Vec<&[u8]> = text
                    .split(|b| !class[*b as usize])
                    .filter(|run| run.len() >= shortest)
                    .collect();
                let strided: Vec<&[u8]> = runs(&text, class, shortest).collect();
                proptest::prop_assert_eq!(strided, naive);
            }
        }

    }
}
