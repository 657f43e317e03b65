//! The model's code as the compiler checks it: as a module when it is one, else as the body
//! of an async function (as the sandbox runs it, but with `api` the declared global rather
//! than an untyped parameter), with where its SDK calls are, so that only what is certainly
//! wrong about them blocks a run.

use deno_ast::swc::ast::{CallExpr, Callee, Expr, MemberExpr, MemberProp};
use deno_ast::swc::ecma_visit::{Visit, VisitWith};
use deno_ast::{MediaType, ModuleSpecifier, ParseParams};

/// The document the compiler checks, and how to find the model's lines and SDK calls in it.
pub struct Document {
    /// The text checked.
    pub text: String,
    /// Lines of the text above the model's first line.
    pub offset: u32,
    /// Byte ranges of the text that are an SDK name (`api.customers.list`), with the name
    /// when it is written with plain identifiers.
    names: Vec<(usize, usize, Option<String>)>,
    /// Byte ranges of the text that are an SDK call, arguments included.
    calls: Vec<(usize, usize)>,
    line_starts: Vec<usize>,
}

const REFERENCE: &str = "/// <reference path=\"./sdk.d.ts\" />\n";

impl Document {
    /// The document for `code`.
    pub fn new(code: &str) -> Self {
        let code = code.trim_start_matches('\u{FEFF}');
        let (text, offset) = match parse(code) {
            Some(_) => (format!("{REFERENCE}{}\nexport {{}};\n", closed(code)), 1),
            None => (
                format!(
                    "{REFERENCE}export default async function __sdkbox_check() {{\n{}\n}}\n",
                    closed(code)
                ),
                2,
            ),
        };
        let mut spans = Spans {
            start: deno_ast::StartSourcePos::START_SOURCE_POS.as_byte_pos().0,
            ..Spans::default()
        };
        if let Some(parsed) = parse(&text) {
            parsed.program_ref().visit_with(&mut spans);
        }
        let start = spans.start;
        let to_range = |(lo, hi): (u32, u32)| {
            (
                lo.saturating_sub(start) as usize,
                hi.saturating_sub(start) as usize,
            )
        };
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Self {
            names: spans
                .names
                .into_iter()
                .map(|(lo, hi, name)| {
                    let (lo, hi) = to_range((lo, hi));
                    (lo, hi, name)
                })
                .collect(),
            calls: spans.calls.into_iter().map(to_range).collect(),
            line_starts,
            text,
            offset,
        }
    }

    /// The byte offset of a 0-based line and UTF-16 character.
    fn at(&self, line: u32, character: u32) -> Option<usize> {
        let start = *self.line_starts.get(line as usize)?;
        let rest = &self.text[start..];
        let mut units = 0;
        for (index, c) in rest.char_indices() {
            if units >= character as usize || c == '\n' {
                return Some(start + index);
            }
            units += c.len_utf16();
        }
        Some(self.text.len())
    }

    /// The SDK name a position is in (the whole chain, `api.orders.retrieve`), if it is in
    /// one; `Some(None)` when the chain is not plain identifiers.
    pub fn sdk_name_at(&self, line: u32, character: u32) -> Option<Option<&str>> {
        let at = self.at(line, character)?;
        self.names
            .iter()
            .filter(|(lo, hi, _)| (*lo..*hi).contains(&at))
            .max_by_key(|(lo, hi, _)| hi - lo)
            .map(|(_, _, name)| name.as_deref())
    }

    /// Whether a position is in an SDK call (its arguments included).
    pub fn in_sdk_call(&self, line: u32, character: u32) -> bool {
        self.at(line, character)
            .is_some_and(|at| self.calls.iter().any(|(lo, hi)| (*lo..*hi).contains(&at)))
    }
}

/// The code with what could make the compiler read files blanked, lines kept: imports (the
/// sandbox loads none; `api` is a global here) and triple-slash directives.
fn closed(code: &str) -> String {
    let mut lines = Vec::new();
    let mut in_import = false;
    for line in code.lines() {
        let trimmed = line.trim();
        let starts = trimmed.starts_with("import ")
            || trimmed.starts_with("import{")
            || trimmed.starts_with("import\"")
            || trimmed.starts_with("import'");
        if in_import || starts {
            in_import =
                !(trimmed.ends_with(';') || trimmed.ends_with('"') || trimmed.ends_with('\''));
            lines.push("");
        } else if trimmed.starts_with("///") {
            lines.push("");
        } else {
            lines.push(line);
        }
    }
    lines.join("\n")
}

fn parse(text: &str) -> Option<deno_ast::ParsedSource> {
    deno_ast::parse_module(ParseParams {
        specifier: ModuleSpecifier::parse("file:///check.ts").ok()?,
        text: text.into(),
        media_type: MediaType::TypeScript,
        capture_tokens: false,
        scope_analysis: false,
        maybe_syntax: None,
    })
    .ok()
    // Recoverable errors (a `return` outside a function) count, as in the sandbox's reading.
    .filter(|parsed| parsed.diagnostics().is_empty())
}

/// The SDK names and calls of a program.
#[derive(Default)]
struct Spans {
    names: Vec<(u32, u32, Option<String>)>,
    calls: Vec<(u32, u32)>,
    start: u32,
}

/// Whether `expr` is a member chain rooted at the identifier `api`.
fn rooted_at_api(expr: &Expr) -> bool {
    match expr {
        Expr::Ident(ident) => ident.sym.as_ref() == "api",
        Expr::Member(member) => rooted_at_api(&member.obj),
        Expr::Paren(paren) => rooted_at_api(&paren.expr),
        _ => false,
    }
}

/// `api.orders.retrieve` for a chain of plain names, else `None`.
fn dotted(member: &MemberExpr) -> Option<String> {
    let prop = match &member.prop {
        MemberProp::Ident(name) => name.sym.to_string(),
        _ => return None,
    };
    let object = match &*member.obj {
        Expr::Ident(ident) => ident.sym.to_string(),
        Expr::Member(inner) => dotted(inner)?,
        _ => return None,
    };
    Some(format!("{object}.{prop}"))
}

impl Visit for Spans {
    fn visit_member_expr(&mut self, member: &MemberExpr) {
        if rooted_at_api(&member.obj) {
            self.names
                .push((member.span.lo.0, member.span.hi.0, dotted(member)));
        }
        member.visit_children_with(self);
    }

    fn visit_call_expr(&mut self, call: &CallExpr) {
        if let Callee::Expr(callee) = &call.callee
            && rooted_at_api(callee)
        {
            self.calls.push((call.span.lo.0, call.span.hi.0));
        }
        call.visit_children_with(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_code_is_wrapped_and_its_sdk_calls_found() {
        let document =
            Document::new("const c = await api.customers.lst({ limit: 2 });\nreturn c.dataa;");
        assert_eq!(document.offset, 2);
        // `lst` on line 2 of the document (0-based), in the name and the call.
        let line = 2;
        let column = document.text.lines().nth(2).unwrap().find("lst").unwrap() as u32;
        assert_eq!(
            document.sdk_name_at(line, column),
            Some(Some("api.customers.lst"))
        );
        assert!(document.in_sdk_call(line, column));
        let dataa = document.text.lines().nth(3).unwrap().find("dataa").unwrap() as u32;
        assert_eq!(document.sdk_name_at(3, dataa), None);
        assert!(!document.in_sdk_call(3, dataa));
    }

    #[test]
    fn nothing_in_the_code_makes_the_compiler_read_a_file() {
        let code = "/// <reference path=\"/etc/passwd\" />\nimport {\n  api\n} from \"sdkbox\";\nimport x from '/etc/shadow';\nreturn 1;";
        let document = Document::new(code);
        assert!(!document.text.contains("/etc/"), "{}", document.text);
        assert_eq!(document.text.lines().count(), code.lines().count() + 3);
    }

    #[test]
    fn module_code_is_checked_as_written() {
        let document =
            Document::new("export default async function main() { return api.orders.list(); }");
        assert_eq!(document.offset, 1);
        assert!(document.text.ends_with("export {};\n"));
    }
}
