//! Type-checked `execute`: TypeScript 7's own compiler checks the model's code against the
//! SDK's declarations before anything runs. What is certainly wrong (a syntax error, an
//! unknown SDK group or method, an unknown, missing or mistyped parameter of an SDK call,
//! calling what is not a function) stops the run with the compiler's message, line, caret
//! and "did you mean"; everything else (say, a response property the spec does not declare,
//! since specs are often incomplete) comes back as a warning. A check that cannot finish in
//! time lets the run go ahead, with a note.

mod checker;
mod document;
mod lsp;

pub use checker::{Checker, Diagnostic, Unchecked};
pub use document::Document;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::sdk::Sdk;

use crate::sandbox::{ErrorKind, ExecError};

/// How long one check may take before the run goes ahead unchecked.
pub const CHECK_DEADLINE: Duration = Duration::from_secs(2);

/// Warnings one result lists, at most.
const MAX_WARNINGS: usize = 10;

/// Blocking errors one refusal lists, at most.
const MAX_LISTED: usize = 5;

/// Characters of one compiler message kept.
const MAX_MESSAGE: usize = 400;

/// What the check does with what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Certain errors stop the run; the rest are warnings.
    #[default]
    Block,
    /// Everything is a warning; the code always runs.
    Warn,
    /// No check.
    Off,
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "block" => Ok(Self::Block),
            "warn" => Ok(Self::Warn),
            "off" => Ok(Self::Off),
            _ => Err(format!("`{text}` is not block, warn or off")),
        }
    }
}

/// What the check says about a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it; the model sees these warnings with the result.
    Run(Vec<String>),
    /// Do not run it: this error says why.
    Stop(ExecError),
}

/// A server's type check.
pub struct TypeCheck {
    mode: Mode,
    checker: Checker,
    /// The SDK the declarations were made from: a name it resolves (a spelling an official
    /// SDK uses) is no error, whatever the declarations say.
    sdk: Arc<Sdk>,
}

impl TypeCheck {
    /// The check in `mode` with the compiler at `tsc` (else a TypeScript 7 `tsc` on `PATH`),
    /// preloaded with `declarations`; `None`, with one warning saying why, when the mode is
    /// off or no compiler runs.
    pub async fn start(mode: Mode, tsc: Option<&Path>, sdk: Arc<Sdk>) -> Option<Self> {
        if mode == Mode::Off {
            return None;
        }
        let Some(tsc) = compiler(tsc) else {
            tracing::warn!(
                "no TypeScript 7 compiler (--tsc PATH, or tsc on PATH): execute runs without a type check"
            );
            eprintln!(
                "sdkbox: warning: no TypeScript 7 compiler found (--tsc PATH): scripts are not type-checked"
            );
            return None;
        };
        let declarations = crate::sdk::declarations(sdk.api());
        match Checker::start(&tsc, &declarations, CHECK_DEADLINE).await {
            Ok(checker) => Some(Self { mode, checker, sdk }),
            Err(Unchecked(why)) => {
                eprintln!("sdkbox: warning: the type check is off: {why}");
                None
            }
        }
    }

    /// The checker, for tests and measurements.
    pub fn checker(&self) -> &Checker {
        &self.checker
    }

    /// Checks `code`.
    pub async fn verdict(&self, code: &str) -> Verdict {
        let document = Document::new(code);
        let diagnostics = match self.checker.diagnostics(&document.text).await {
            Ok(diagnostics) => diagnostics,
            Err(Unchecked(why)) => {
                return Verdict::Run(vec![format!("not type-checked: {why}")]);
            }
        };
        // A name the SDK resolves at run time (`api.orders.retrieve` for `get`) is fine.
        let diagnostics: Vec<Diagnostic> = diagnostics
            .into_iter()
            .filter(|d| !self.resolves(&document, d))
            .collect();
        judge(&document, code, &diagnostics, self.mode)
    }

    /// Whether `diagnostic` is about an SDK name the SDK resolves after all.
    fn resolves(&self, document: &Document, diagnostic: &Diagnostic) -> bool {
        if !matches!(diagnostic.code, 2339 | 2551) {
            return false;
        }
        let Some(Some(name)) = document.sdk_name_at(diagnostic.line, diagnostic.character) else {
            return false;
        };
        let parts: Vec<&str> = name.split('.').skip(1).collect();
        let Some((method, group)) = parts.split_last() else {
            return false;
        };
        !group.is_empty() && self.sdk.operation(&group.join("."), method).is_ok()
    }
}

/// The compiler to use: the one given, else `tsc` on `PATH` if it is TypeScript 7.
fn compiler(given: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = given {
        return Some(path.to_owned());
    }
    let output = std::process::Command::new("tsc")
        .arg("--version")
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stdout)
        .starts_with("Version 7.")
        .then(|| PathBuf::from("tsc"))
}

/// Whether a diagnostic is certain enough to stop a run.
fn blocks(diagnostic: &Diagnostic, document: &Document) -> bool {
    let (line, character) = (diagnostic.line, diagnostic.character);
    match diagnostic.code {
        // Syntax.
        1000..=1999 => true,
        // Calling what is not a function.
        2349 => true,
        // A property of the SDK itself that does not exist: an unknown group or method.
        2339 | 2551 => document.sdk_name_at(line, character).is_some(),
        // An SDK call's arguments: not assignable, unknown, missing, misspelled properties,
        // the wrong number of arguments, no overload that fits.
        // `body: { ... }` is how the SDK also takes an object body's fields (when a parameter
        // hides one): not certain, so not blocking.
        2353 if diagnostic.message.contains("'body' does not exist") => false,
        2322 | 2345 | 2353 | 2559 | 2561 | 2554 | 2555 | 2739 | 2740 | 2741 | 2769 | 2820 => {
            document.in_sdk_call(line, character)
        }
        _ => false,
    }
}

/// The verdict on `code`, from its diagnostics.
fn judge(document: &Document, code: &str, diagnostics: &[Diagnostic], mode: Mode) -> Verdict {
    let lines: Vec<&str> = code.lines().collect();
    let place = |d: &Diagnostic| {
        let line = d.line.checked_sub(document.offset).map(|l| l + 1);
        (line, d.character + 1)
    };
    let said = |d: &Diagnostic| {
        let message = crate::egress::cut(&d.message.replace('\n', " "), MAX_MESSAGE);
        match place(d) {
            (Some(line), column) => format!("{line}:{column} TS{}: {message}", d.code),
            (None, _) => format!("TS{}: {message}", d.code),
        }
    };
    let (stopping, warning): (Vec<&Diagnostic>, Vec<&Diagnostic>) = diagnostics
        .iter()
        .partition(|d| mode == Mode::Block && blocks(d, document));
    let warnings: Vec<String> = warning.iter().take(MAX_WARNINGS).map(|d| said(d)).collect();
    let Some(first) = stopping.first() else {
        return Verdict::Run(warnings);
    };
    let listed: Vec<String> = stopping.iter().take(MAX_LISTED).map(|d| said(d)).collect();
    let more = match stopping.len().saturating_sub(MAX_LISTED) {
        0 => String::new(),
        n => format!("\n(and {n} more)"),
    };
    let (line, column) = place(first);
    let excerpt = line.and_then(|l| lines.get(l as usize - 1)).map(|text| {
        let pad: String = text
            .chars()
            .take(column as usize - 1)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        format!("{text}\n{pad}^")
    });
    Verdict::Stop(ExecError {
        kind: ErrorKind::Type,
        name: Some("TypeError".into()),
        message: format!(
            "the code was not run: TypeScript found {} certain error{} in it (nothing was sent); fix {} and run it again:\n{}{more}",
            stopping.len(),
            if stopping.len() == 1 { "" } else { "s" },
            if stopping.len() == 1 { "it" } else { "them" },
            listed.join("\n")
        ),
        line,
        column: line.map(|_| column),
        excerpt,
        stack: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diagnostic(document: &Document, needle: &str, code: u32, message: &str) -> Diagnostic {
        let (line, text) = document
            .text
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains(needle))
            .unwrap();
        Diagnostic {
            code,
            message: message.into(),
            line: line as u32,
            character: text.find(needle).unwrap() as u32,
        }
    }

    #[test]
    fn only_certain_errors_about_sdk_calls_stop_a_run() {
        let code = "const c = await api.customers.lst({ limit: 2 });\nreturn c.dataa;";
        let document = Document::new(code);
        let method = diagnostic(
            &document,
            "lst",
            2551,
            "Property 'lst' does not exist. Did you mean 'list'?",
        );
        let field = diagnostic(
            &document,
            "dataa",
            2551,
            "Property 'dataa' does not exist. Did you mean 'data'?",
        );
        let Verdict::Stop(error) = judge(
            &document,
            code,
            &[method.clone(), field.clone()],
            Mode::Block,
        ) else {
            panic!("a misspelled method must stop the run");
        };
        assert_eq!(error.kind, ErrorKind::Type);
        assert_eq!((error.line, error.column), (Some(1), Some(31)));
        assert!(
            error.message.contains("1:31 TS2551: Property 'lst'"),
            "{}",
            error.message
        );
        assert!(!error.message.contains("dataa"), "{}", error.message);
        assert_eq!(
            error.excerpt.as_deref(),
            Some(
                "const c = await api.customers.lst({ limit: 2 });\n                              ^"
            )
        );
        // A response field: a warning only. In warn mode nothing stops.
        assert_eq!(
            judge(&document, code, std::slice::from_ref(&field), Mode::Block),
            Verdict::Run(vec![
                "2:10 TS2551: Property 'dataa' does not exist. Did you mean 'data'?".into()
            ])
        );
        assert!(
            matches!(judge(&document, code, &[method], Mode::Warn), Verdict::Run(w) if w.len() == 1)
        );
    }
}
