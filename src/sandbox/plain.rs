//! Message text as a model reads it: what sdkbox, the script, the engine, the compiler or a
//! provider's error page put into an outcome's messages reaches the client as plain text,
//! without terminal escapes (colours, cursor moves, title changes) or control characters a
//! client could render, log or act on. Line breaks and tabs are kept: compiler messages and
//! stacks are laid out with them.

/// The longest escape sequence dropped whole: past it, the rest is text again (an escape
/// left open would otherwise take the message's end with it).
const MAX_ESCAPE: usize = 256;

/// `text` without terminal escape sequences, control characters (C0 but line breaks and
/// tabs, DEL, C1) and the invisible characters that reorder or hide text (bidirectional
/// controls, zero-width characters); a carriage return before a line break is dropped,
/// another is a line break, and so are the Unicode line and paragraph separators.
pub fn text(text: &str) -> String {
    if !text.chars().any(unclean) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // ESC [ parameters intermediates final (CSI); ESC ] ... BEL or ESC \ (OSC); ESC
            // and one more character otherwise.
            '\u{1b}' => match chars.next() {
                Some('[') => {
                    for c in chars.by_ref().take(MAX_ESCAPE) {
                        if ('\u{40}'..='\u{7e}').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    for _ in 0..MAX_ESCAPE {
                        match chars.next() {
                            None | Some('\u{7}') => break,
                            Some('\u{1b}') if chars.next_if_eq(&'\\').is_some() => break,
                            Some(_) => {}
                        }
                    }
                }
                _ => {}
            },
            '\r' if chars.peek() == Some(&'\n') => {}
            '\r' | '\u{2028}' | '\u{2029}' => out.push('\n'),
            c if unclean(c) => {}
            c => out.push(c),
        }
    }
    out
}

/// Whether `c` is not kept as it is.
fn unclean(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c,
            '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
            | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{061c}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_control_characters_go_and_layout_stays() {
        assert_eq!(text("plain\n\ttext"), "plain\n\ttext");
        assert_eq!(
            text("\u{1b}[31;1mred\u{1b}[0m and \u{1b}]0;title\u{7}done"),
            "red and done"
        );
        assert_eq!(text("\u{1b}]8;;http://x\u{1b}\\link"), "link");
        assert_eq!(text("a\u{0}b\u{7}c\u{7f}d\u{9b}e"), "abcde");
        assert_eq!(text("one\r\ntwo\rthree"), "one\ntwo\nthree");
        assert_eq!(text("cut \u{1b}["), "cut ");
        assert_eq!(text("é ünïcödé ✓"), "é ünïcödé ✓");
        // An escape left open takes at most its bound with it.
        let open = format!("\u{1b}]{}", "x".repeat(MAX_ESCAPE + 10));
        assert_eq!(
            text(&format!("{open}: advice")),
            format!("{}: advice", "x".repeat(10))
        );
        assert_eq!(text("a\u{202e}b\u{200b}c\u{2028}d"), "abc\nd");
    }

    /// The messages sdkbox writes itself are one line of text each where they are written
    /// as one: a string literal in the sources that runs over a line break without a `\`
    /// carries the next line's indentation into the message (a run of spaces a model reads).
    #[test]
    fn no_message_in_the_sources_carries_the_next_lines_indentation() {
        let mut found = Vec::new();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let source = std::fs::read_to_string(&path).unwrap();
                    for line in broken_literals(&source) {
                        found.push(format!("{}:{line}", path.display()));
                    }
                }
            }
        }
        assert!(found.is_empty(), "{found:#?}");
        assert_eq!(broken_literals("let a = \"one\n    two\";"), [1]);
        assert!(broken_literals("let a = \"one \\\n    two\"; // \"x\n").is_empty());
        assert!(broken_literals("let a = r#\"one\n two\"#; let c = '\"';").is_empty());
    }

    /// How many `#` a raw string literal starting `rest` has (`r"`, `r#"`, `br##"`), if one
    /// does.
    fn raw_opening(rest: &str) -> Option<usize> {
        let after_r = rest.strip_prefix('b').unwrap_or(rest).strip_prefix('r')?;
        let hashes = after_r.len() - after_r.trim_start_matches('#').len();
        after_r[hashes..].starts_with('"').then_some(hashes)
    }

    /// Lines where an ordinary string literal of `source` runs over a line break that no `\`
    /// escapes (comments, raw strings and character literals skipped).
    fn broken_literals(source: &str) -> Vec<usize> {
        let bytes = source.as_bytes();
        let line = |at: usize| source[..at].matches('\n').count() + 1;
        let mut found = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if !source.is_char_boundary(i) {
                i += 1;
                continue;
            }
            let rest = &source[i..];
            let after_word =
                i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
            if rest.starts_with("//") {
                i += rest.find('\n').unwrap_or(rest.len());
            } else if rest.starts_with("/*") {
                i += rest.find("*/").map_or(rest.len(), |end| end + 2);
            } else if let Some(hashes) = raw_opening(rest).filter(|_| !after_word) {
                let close = format!("\"{}", "#".repeat(hashes));
                i += rest.find('"').map_or(rest.len(), |open| open + 1);
                i += source[i..]
                    .find(&close)
                    .map_or(source.len() - i, |end| end + close.len());
            } else if bytes[i] == b'\'' {
                // A character literal (`'"'`, `'\''`, `'é'`), or a lifetime.
                let mut chars = rest.char_indices().skip(1);
                i += match (chars.next(), chars.next()) {
                    (Some((_, '\\')), _) => rest[2..].find('\'').map_or(rest.len(), |end| end + 3),
                    (Some(_), Some((end, '\''))) => end + 1,
                    _ => 1,
                };
            } else if bytes[i] == b'"' {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        i += 2;
                        continue;
                    }
                    if bytes[i] == b'\n' {
                        found.push(line(start));
                        i += source[i..].find('"').unwrap_or(0);
                        break;
                    }
                    i += 1;
                }
                i += 1;
            } else {
                i += 1;
            }
        }
        found
    }
}
