//! The one analyzer used for writing and reading the index: identifiers and paths split into
//! words (camelCase, snake_case, kebab-case, `/{id}` segments), lower-cased and stemmed.
//! Tantivy does not store custom tokenizers in the index, so both sides call [`register`].

use tantivy::Index;
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, Token,
    TokenStream, Tokenizer,
};

/// The analyzer's registered name, used in the schema.
pub const ANALYZER: &str = "sdkbox";

/// Registers the analyzer on `index`.
pub fn register(index: &Index) {
    index.tokenizers().register(ANALYZER, analyzer());
}

/// Words too common to tell operations apart ("get a repository" must not favour ids that
/// contain "a").
const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "of", "for", "to", "on", "in", "by", "my", "our", "their", "its", "is",
    "are", "be", "and", "or", "with", "from", "at", "as", "this", "that", "what", "which", "how",
    "do", "does", "i", "me", "we", "you", "it", "all", "some", "please", "can",
];

/// Splits identifiers and prose alike, then lower-cases, drops stop words and stems.
pub fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(IdentTokenizer)
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(
            STOP_WORDS.iter().map(|w| (*w).to_owned()),
        ))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// The analyzed terms of `text`, as the index sees them.
pub fn terms(text: &str) -> Vec<String> {
    let mut analyzer = analyzer();
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

/// Splits on anything but letters and digits, and inside words at case changes.
#[derive(Clone)]
struct IdentTokenizer;

/// The tokens of one text, computed up front.
struct Tokens {
    tokens: Vec<Token>,
    next: usize,
}

impl Tokenizer for IdentTokenizer {
    type TokenStream<'a> = Tokens;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Tokens {
        let mut tokens = Vec::new();
        let mut start = None;
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let push = |from: usize, to: usize, tokens: &mut Vec<Token>| {
            tokens.push(Token {
                offset_from: from,
                offset_to: to,
                position: tokens.len(),
                text: text[from..to].to_owned(),
                position_length: 1,
            });
        };
        for (i, &(at, c)) in chars.iter().enumerate() {
            if !c.is_alphanumeric() {
                if let Some(from) = start.take() {
                    push(from, at, &mut tokens);
                }
                continue;
            }
            let prev = i.checked_sub(1).map(|p| chars[p].1);
            let next = chars.get(i + 1).map(|n| n.1);
            let boundary = c.is_uppercase()
                && prev.is_some_and(|p| {
                    p.is_lowercase()
                        || p.is_ascii_digit()
                        || (p.is_uppercase() && next.is_some_and(char::is_lowercase))
                });
            match start {
                Some(from) if boundary => {
                    push(from, at, &mut tokens);
                    start = Some(at);
                }
                None => start = Some(at),
                _ => {}
            }
        }
        if let Some(from) = start {
            push(from, text.len(), &mut tokens);
        }
        Tokens { tokens, next: 0 }
    }
}

impl TokenStream for Tokens {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_paths_and_prose_become_stemmed_words() {
        assert_eq!(terms("listForOrg"), ["list", "org"]);
        assert_eq!(
            terms("/v1/payment_intents/{intent}/confirm"),
            ["v1", "payment", "intent", "intent", "confirm"]
        );
        assert_eq!(terms("repos/list-for-org"), ["repo", "list", "org"]);
        assert_eq!(terms("get a repository"), ["get", "repositori"]);
        assert_eq!(terms("Creates refunds"), ["creat", "refund"]);
        assert_eq!(terms("getHTTPStatus"), ["get", "http", "status"]);
    }
}
