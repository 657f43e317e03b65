//! Results as JavaScript writes them, made readable by Rust: `JSON.stringify` escapes half
//! of a UTF-16 surrogate pair (`"😀".split("")`) as `\udXXX`, which Rust strings cannot hold.

/// `json` (as `JSON.stringify` writes it) with each lone UTF-16 surrogate written as U+FFFD:
/// JavaScript strings may hold half of a pair (`"😀".split("")`), which `JSON.stringify`
/// escapes as `\udXXX` and Rust's strings cannot hold.
pub(super) fn mend_lone_surrogates(json: &str) -> std::borrow::Cow<'_, str> {
    let bytes = json.as_bytes();
    let unit = |at: usize| -> Option<u32> {
        let escape = bytes.get(at..at + 6)?;
        if escape[0] != b'\\' || escape[1] != b'u' {
            return None;
        }
        u32::from_str_radix(std::str::from_utf8(&escape[2..]).ok()?, 16).ok()
    };
    let mut out = String::new();
    let mut copied = 0;
    let mut i = 0;
    while let Some(found) = memchr::memchr(b'\\', &bytes[i..]) {
        let at = i + found;
        let lone = match unit(at) {
            Some(0xD800..=0xDBFF) => {
                let paired = unit(at + 6).is_some_and(|low| (0xDC00..=0xDFFF).contains(&low));
                if paired {
                    i = at + 12;
                    continue;
                }
                true
            }
            Some(0xDC00..=0xDFFF) => true,
            _ => false,
        };
        if lone {
            out.push_str(&json[copied..at]);
            out.push_str("\\ufffd");
            copied = at + 6;
            i = at + 6;
        } else {
            // Any other escape is two characters at least; the next cannot start inside it.
            i = (at + 2).min(bytes.len());
        }
    }
    if copied == 0 {
        return std::borrow::Cow::Borrowed(json);
    }
    out.push_str(&json[copied..]);
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::mend_lone_surrogates;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let json = r#"["\ud83d|\ude00", "\ud83d\ude00", "\\ud83d", "\udc00x"]"#;
        let value: serde_json::Value = serde_json::from_str(&mend_lone_surrogates(json)).unwrap();
        assert_eq!(
            value,
            serde_json::json!(["\u{fffd}|\u{fffd}", "\u{1F600}", "\\ud83d", "\u{fffd}x"])
        );
        assert!(matches!(
            mend_lone_surrogates(r#"{"a":"\n"}"#),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
