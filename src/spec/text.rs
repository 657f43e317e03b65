//! Plain text from the spec's descriptions: HTML tags and markdown markup removed, links
//! reduced to their text, white space folded.

/// `text` without markup, on one line.
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '<' => {
                // Skip an HTML tag; keep a lone `<` that does not start one.
                if chars
                    .peek()
                    .is_some_and(|n| n.is_ascii_alphabetic() || *n == '/' || *n == '!')
                {
                    for n in chars.by_ref() {
                        if n == '>' {
                            break;
                        }
                    }
                    out.push(' ');
                } else {
                    out.push(c);
                }
            }
            '[' => {
                // [text](url) -> text
                let mut label = String::new();
                let mut closed = false;
                for n in chars.by_ref() {
                    if n == ']' {
                        closed = true;
                        break;
                    }
                    label.push(n);
                }
                out.push_str(&label);
                if closed && chars.peek() == Some(&'(') {
                    for n in chars.by_ref() {
                        if n == ')' {
                            break;
                        }
                    }
                }
            }
            '`' | '*' | '#' => {}
            _ => out.push(c),
        }
    }
    let out = out
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first sentence of `text`, at most `max` characters.
pub fn first_sentence(text: &str, max: usize) -> String {
    let end = text.find(". ").map(|i| i + 1).unwrap_or(text.len());
    shorten(&text[..end], max)
}

/// `text` cut to at most `max` characters, with an ellipsis when cut.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", kept.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_markup() {
        assert_eq!(
            plain(
                "<p>Creates a <a href=\"x\">refund</a>.</p>\n\nSee [the guide](https://x/y) and `id`."
            ),
            "Creates a refund . See the guide and id."
        );
        assert_eq!(plain("a < b &amp; c"), "a < b & c");
    }

    #[test]
    fn first_sentences_are_short() {
        assert_eq!(
            first_sentence("Lists things. More text.", 100),
            "Lists things."
        );
        assert_eq!(shorten("abcdefghij", 5), "abcd…");
    }
}
