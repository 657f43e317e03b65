//! From the model's TypeScript to the JavaScript module the isolate runs, and back from
//! positions in that JavaScript to lines of the model's own code.
//!
//! The code may be the body of an async function (`return` gives the result), a module that
//! exports a default function or declares `run(api)` / `main(api)`, or a lone arrow function
//! (`async (api) => { ... }`). Types are stripped by deno_ast; nothing is type-checked.

use std::sync::Arc;

use super::{entry, nesting};

use deno_ast::swc::ast::{Expr, ModuleDecl, ModuleItem, Stmt};
use deno_ast::swc::sourcemap::SourceMap;
use deno_ast::{
    EmitOptions, MediaType, ModuleSpecifier, ParseParams, ParsedSource, ProgramRef,
    SourceMapOption, TranspileModuleOptions, TranspileOptions,
};

/// The URL the model's module is known by, in stack traces and to the module loader.
pub const MODULE_URL: &str = "file:///code.ts";

/// The name the model's entry function is exported under.
pub const ENTRY_EXPORT: &str = "__sdkbox_entry";

/// The model's code, ready to load, with what is needed to map errors back to it.
pub struct Program {
    /// The JavaScript module.
    pub js: String,
    map: Option<SourceMap>,
    /// Lines that sdkbox added above the model's first line.
    line_offset: u32,
    /// Text sdkbox inserted into lines of the model's code (the entry's guard).
    shifts: Vec<Shift>,
    lines: Vec<String>,
    /// Whether the harness calls the entry when the script has not run it: not when the
    /// script refers to the entry itself (see [`entry`]).
    pub call_entry: bool,
    /// The entry's name in the guard, when it is guarded: the harness asks the guard
    /// whether it ran.
    pub guarded: Option<String>,
}

/// A syntax error, positioned in the model's code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// What the parser said.
    pub message: String,
    /// 1-based line in the model's code.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
    /// The line with a caret under the column.
    pub excerpt: String,
}

/// The stack the parser runs on. Parsing, transpiling and dropping the syntax tree recurse
/// once per level of nesting; on a default 8 MiB stack 5,000 nested brackets overflow it,
/// which aborts the process. Only the pages used are ever committed.
const PARSER_STACK: usize = 256 * 1024 * 1024;

/// Nesting that the calling thread's stack parses safely (a few hundred KiB of parser
/// frames); deeper code is parsed on a thread with [`PARSER_STACK`].
const SHALLOW: usize = 64;

/// Transpiles the model's code into a module whose entry the harness can call. Refuses code
/// nested deeper than [`nesting::MAX_NESTING`] before parsing it, and parses deeply nested
/// code on a thread with a large stack, so no input can overflow the parser's stack.
pub fn compile(code: &str) -> Result<Program, SyntaxError> {
    // The parser drops byte order marks; offsets into the code must not count them.
    let code = code.trim_start_matches('\u{FEFF}');
    if nesting::deepest(code)? <= SHALLOW {
        return compile_here(code);
    }
    let compiled = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("sdkbox-compile".into())
            .stack_size(PARSER_STACK)
            .spawn_scoped(scope, || compile_here(code))
            .map(|thread| thread.join())
    });
    let internal = |message: String| SyntaxError {
        message,
        line: 1,
        column: 1,
        excerpt: String::new(),
    };
    match compiled {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err(internal(
            "the TypeScript compiler failed on this code".into(),
        )),
        Err(e) => Err(internal(format!(
            "cannot start the TypeScript compiler: {e}"
        ))),
    }
}

fn compile_here(code: &str) -> Result<Program, SyntaxError> {
    let lines: Vec<String> = code.lines().map(str::to_owned).collect();
    // A module that reaches the guard is refused as it is, whatever a body reading says.
    let parsed = match parse(code).map(own_modules_only) {
        Ok(Err(refused)) => return Err(refused.with_excerpt(&lines)),
        Ok(Ok(parsed)) => Ok(parsed),
        Err(error) => Err(error),
    };
    let as_module = parsed.and_then(|parsed| compile_module(code, parsed, &lines));
    let module_error = match as_module {
        Ok(program) => return Ok(program),
        Err(error) => error,
    };
    let (imports, body) = hoist_imports(code);
    let wrapped =
        format!("{imports}export default async function {ENTRY_EXPORT}(api) {{\n{body}\n}}\n");
    let body_error = match parse(&wrapped)
        .and_then(own_modules_only)
        .and_then(|parsed| emit(parsed, 1, &lines))
    {
        Ok(program) => return Ok(program),
        Err(error) => error,
    };
    // Report the error the parser met furthest into the code: the other reading usually
    // stops early on something valid in this style (a top-level `return`, an `export`).
    let body_error = body_error.shifted(1);
    let error = if (body_error.line, body_error.column) >= (module_error.line, module_error.column)
    {
        body_error
    } else {
        module_error
    };
    Err(error.with_excerpt(&lines))
}

/// Compiles code that parsed as a module: a lone function becomes the default export; an
/// entry function (see [`entry`]) is wrapped in the guard that runs it at most once, and
/// exported for the harness unless the script calls it itself.
fn compile_module(code: &str, parsed: ParsedSource, lines: &[String]) -> Result<Program, RawError> {
    if let Some((before, after)) = lone_function(&parsed).and_then(|at| split(code, at)) {
        let source = format!("{before}export default {after}");
        return emit(parse(&source)?, 0, lines);
    }
    let guard = guard_name();
    let Some(entry) = entry::find(&parsed, &guard) else {
        return emit(parsed, 0, lines);
    };
    let (parsed, shifts) = match entry.patches.is_empty() {
        true => (parsed, Vec::new()),
        false => {
            let (source, shifts) = patched(code, &entry.patches).ok_or_else(|| RawError {
                message: "the entry function could not be guarded (an offset inside a \
                          character); rewrite the code as the body of a function"
                    .to_owned(),
                line: 1,
                column: 1,
            })?;
            (parse(&source)?, shifts)
        }
    };
    let mut program = emit(parsed, 0, lines)?;
    program.shifts = shifts;
    program.call_entry = !entry.script_calls;
    program.guarded = entry.guarded;
    if let Some(name) = entry.export {
        program
            .js
            .push_str(&format!("\nexport {{ {name} as {ENTRY_EXPORT} }};\n"));
    }
    if !entry.patches.is_empty() {
        program.js.push_str(&format!(
            "\nimport {{ once as {guard} }} from \"{}\";\n",
            entry::GUARD_URL
        ));
    }
    Ok(program)
}

/// The name the entry's wrapped body calls the guard by: random, so that nothing in the
/// model's code can shadow it.
fn guard_name() -> String {
    let mut bytes = [0u8; 8];
    match getrandom::fill(&mut bytes) {
        Ok(()) => format!("__sdkbox_once_{}", crate::hex::hex(&bytes)),
        Err(_) => "__sdkbox_once".to_owned(),
    }
}

/// `code` split at byte `at`, if that is a character boundary.
fn split(code: &str, at: usize) -> Option<(&str, &str)> {
    Some((code.get(..at)?, code.get(at..)?))
}

/// `code` with `patches` inserted (in order of their offsets), and where each insertion
/// landed, so that positions can be mapped back to the model's columns; `None` if an offset
/// is not a character boundary.
fn patched(code: &str, patches: &[(usize, String)]) -> Option<(String, Vec<Shift>)> {
    let mut text = String::with_capacity(code.len() + 128);
    let mut shifts = Vec::new();
    let mut from = 0;
    for (at, insert) in patches {
        text.push_str(code.get(from..*at)?);
        let line_start = text.rfind('\n').map_or(0, |i| i + 1);
        shifts.push(Shift {
            line: text.matches('\n').count() as u32 + 1,
            column: text[line_start..].chars().count() as u32 + 1,
            length: insert.chars().count() as u32,
        });
        text.push_str(insert);
        from = *at;
    }
    text.push_str(code.get(from..)?);
    Some((text, shifts))
}

/// Text sdkbox inserted into a line of the model's code: from `column` (1-based), `length`
/// characters.
#[derive(Debug, Clone, Copy)]
struct Shift {
    line: u32,
    column: u32,
    length: u32,
}

impl Program {
    /// Maps a 1-based position in the emitted JavaScript to the model's code.
    pub fn map_position(&self, line: u32, column: u32) -> Option<(u32, u32)> {
        let map = self.map.as_ref()?;
        let token = map.lookup_token(line.checked_sub(1)?, column.saturating_sub(1))?;
        let src_line = (token.get_src_line() + 1).checked_sub(self.line_offset)?;
        if src_line == 0 || src_line as usize > self.lines.len() {
            return None;
        }
        let mut column = token.get_src_col() + 1;
        // Right to left: each insertion's column counts the insertions before it.
        for shift in self.shifts.iter().rev().filter(|s| s.line == src_line) {
            if column >= shift.column + shift.length {
                column -= shift.length;
            } else if column > shift.column {
                column = shift.column;
            }
        }
        Some((src_line, column))
    }

    /// The model's line with a caret under `column`.
    pub fn excerpt(&self, line: u32, column: u32) -> String {
        excerpt(&self.lines, line, column)
    }
}

/// Moves the leading `import` statements of body-style code out of the wrapper function
/// (imports are only valid at the top of a module). They go on the wrapper's own line and
/// leave blank lines behind, so the model's line numbers do not move. The lines are found by
/// their first word and then parsed: unless they are import declarations and nothing else,
/// nothing moves and the parser reports the code as written.
fn hoist_imports(code: &str) -> (String, String) {
    let mut imports = String::new();
    let mut body = Vec::new();
    let mut in_import = false;
    let mut preamble = true;
    for line in code.lines() {
        let trimmed = line.trim();
        let starts = trimmed.starts_with("import ") || trimmed.starts_with("import{");
        if preamble && (in_import || starts) {
            imports.push_str(trimmed);
            imports.push(' ');
            in_import =
                !(trimmed.ends_with(';') || trimmed.ends_with('"') || trimmed.ends_with('\''));
            body.push("");
            continue;
        }
        if !trimmed.is_empty() && !trimmed.starts_with("//") {
            preamble = false;
        }
        body.push(line);
    }
    if !imports.is_empty() && !only_imports(&imports) {
        return (String::new(), code.to_owned());
    }
    (imports, body.join("\n"))
}

/// Whether `text` parses as a module of import declarations and nothing else.
fn only_imports(text: &str) -> bool {
    parse(text).is_ok_and(|parsed| match parsed.program_ref() {
        ProgramRef::Module(module) => module
            .body
            .iter()
            .all(|item| matches!(item, ModuleItem::ModuleDecl(ModuleDecl::Import(_)))),
        _ => false,
    })
}

/// A parse error before it is placed in the model's coordinates.
struct RawError {
    message: String,
    line: u32,
    column: u32,
}

impl RawError {
    fn shifted(self, offset: u32) -> Self {
        Self {
            line: self.line.saturating_sub(offset).max(1),
            ..self
        }
    }

    fn with_excerpt(self, lines: &[String]) -> SyntaxError {
        let line = self.line.min(lines.len().max(1) as u32);
        SyntaxError {
            excerpt: excerpt(lines, line, self.column),
            message: self.message,
            line,
            column: self.column,
        }
    }
}

/// Refuses a script that imports or re-exports sdkbox's own guard module (`sdkbox:entry`):
/// its `once` could make the harness believe the entry ran, and its records are the
/// guard's. (A dynamic `import()` of it is refused by the loader.)
fn own_modules_only(parsed: ParsedSource) -> Result<ParsedSource, RawError> {
    let reaches_guard = match parsed.program_ref() {
        deno_ast::ProgramRef::Module(module) => module.body.iter().any(|item| {
            let source = match item {
                ModuleItem::ModuleDecl(ModuleDecl::Import(import)) => Some(&import.src),
                ModuleItem::ModuleDecl(ModuleDecl::ExportAll(export)) => Some(&export.src),
                ModuleItem::ModuleDecl(ModuleDecl::ExportNamed(export)) => export.src.as_ref(),
                _ => None,
            };
            source.is_some_and(|src| &*src.value == entry::GUARD_URL)
        }),
        deno_ast::ProgramRef::Script(_) => false,
    };
    match reaches_guard {
        true => Err(RawError {
            message: format!(
                "`{}` is sdkbox's own module: a script cannot import it",
                entry::GUARD_URL
            ),
            line: 1,
            column: 1,
        }),
        false => Ok(parsed),
    }
}

fn parse(text: &str) -> Result<ParsedSource, RawError> {
    let specifier = ModuleSpecifier::parse(MODULE_URL).map_err(|e| RawError {
        message: e.to_string(),
        line: 1,
        column: 1,
    })?;
    let parsed = deno_ast::parse_module(ParseParams {
        specifier,
        text: Arc::from(text),
        media_type: MediaType::TypeScript,
        capture_tokens: false,
        // Tells bindings apart from their namesakes, for finding uses of the entry.
        scope_analysis: true,
        maybe_syntax: None,
    })
    .map_err(|d| diagnostic(&d))?;
    match parsed.diagnostics().first() {
        Some(d) => Err(diagnostic(d)),
        None => Ok(parsed),
    }
}

fn diagnostic(d: &deno_ast::ParseDiagnostic) -> RawError {
    let position = d.display_position();
    RawError {
        message: d.kind().msg().into_owned(),
        line: position.line_number as u32,
        column: position.column_number as u32,
    }
}

fn emit(parsed: ParsedSource, line_offset: u32, lines: &[String]) -> Result<Program, RawError> {
    let emit_options = EmitOptions {
        source_map: SourceMapOption::Separate,
        inline_sources: false,
        ..Default::default()
    };
    let emitted = parsed
        .transpile(
            &TranspileOptions::default(),
            &TranspileModuleOptions::default(),
            &emit_options,
        )
        .map_err(|e| RawError {
            message: e.to_string(),
            line: 1,
            column: 1,
        })?
        .into_source();
    let map = emitted
        .source_map
        .and_then(|m| SourceMap::from_slice(m.as_bytes()).ok());
    Ok(Program {
        js: emitted.text,
        map,
        line_offset,
        shifts: Vec::new(),
        lines: lines.to_vec(),
        call_entry: true,
        guarded: None,
    })
}

/// Where a module that is a lone function expression (`async (api) => {...}`) starts.
fn lone_function(parsed: &ParsedSource) -> Option<usize> {
    let ProgramRef::Module(module) = parsed.program_ref() else {
        return None;
    };
    // Imports aside, one statement: the function.
    let mut rest = module
        .body
        .iter()
        .filter(|item| !matches!(item, ModuleItem::ModuleDecl(ModuleDecl::Import(_))));
    let (Some(ModuleItem::Stmt(Stmt::Expr(expr))), None) = (rest.next(), rest.next()) else {
        return None;
    };
    if !is_function(&expr.expr) {
        return None;
    }
    let start = parsed.text_info_lazy().range().start;
    Some(expr.span.lo.0 as usize - start.as_byte_pos().0 as usize)
}

fn is_function(expr: &Expr) -> bool {
    match expr {
        Expr::Arrow(_) | Expr::Fn(_) => true,
        Expr::Paren(inner) => is_function(&inner.expr),
        _ => false,
    }
}

fn excerpt(lines: &[String], line: u32, column: u32) -> String {
    let Some(text) = lines.get(line.saturating_sub(1) as usize) else {
        return String::new();
    };
    let number = line.to_string();
    let pad = " ".repeat(number.len());
    let caret_pad: String = text
        .chars()
        .take(column.saturating_sub(1) as usize)
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    format!("{number} | {text}\n{pad} | {caret_pad}^")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_style_is_wrapped() {
        let program = compile("const x: number = 1;\nreturn x + 1;").unwrap();
        assert!(
            program
                .js
                .contains("export default async function __sdkbox_entry(api)")
        );
        assert!(!program.js.contains(": number"));
    }

    #[test]
    fn a_declared_entry_is_exported_guarded_and_left_to_a_script_that_calls_it() {
        let program = compile("async function run(api: any) { return 1 }").unwrap();
        assert!(
            program.js.contains("export { run as __sdkbox_entry }")
                && program.js.contains("from \"sdkbox:entry\"")
                && program.call_entry,
            "{}",
            program.js
        );
        for runs_itself in [
            "await main();",
            "const r = await main(); console.log(r);",
            "main().catch(console.error);",
            "void main();",
            "try { await main() } catch (e) { console.log(e) }",
            "(async () => { await main(); })();",
            "await Promise.all([main()]);",
            "if (Date.now() > 0) { await main(); }",
            "for (let i = 0; i < 3; i++) await main();",
            "await main.call(null, api);",
            "setTimeout(main, 0);",
        ] {
            let code = format!("async function main() {{ return 1 }}\n{runs_itself}");
            let program = compile(&code).unwrap();
            assert!(!program.call_entry, "{code}: {}", program.js);
            assert!(
                program.js.contains("sdkbox:entry"),
                "{code}: {}",
                program.js
            );
        }
        // Not uses: a string, a property of the same name, a parameter that shadows it.
        for mentions in [
            "console.log('main(');",
            "const o = { main: 1 }; console.log(o.main);",
            "function other(main: number) { return main + 1 }",
        ] {
            let code = format!("async function main() {{ return 1 }}\n{mentions}");
            let program = compile(&code).unwrap();
            assert!(program.call_entry, "{code}: {}", program.js);
        }
        // Of run and main, the one the other uses is a helper: main is the entry.
        let program = compile(
            "async function run(x: number) { return x }\nasync function main() { return run(1) + run(2) }",
        )
        .unwrap();
        assert!(
            program.js.contains("export { main as __sdkbox_entry }") && program.call_entry,
            "{}",
            program.js
        );
        // A default export that the module also calls is left to the module.
        let program =
            compile("export default async function main(api) { return 1 }\nawait main(api);")
                .unwrap();
        assert!(!program.call_entry, "{}", program.js);
        let arrow = compile("export const main = async () => 1;").unwrap();
        assert!(
            arrow.js.contains("sdkbox:entry") && arrow.call_entry,
            "{}",
            arrow.js
        );
    }

    #[test]
    fn a_byte_order_mark_is_not_counted_in_offsets() {
        for code in [
            "\u{FEFF}async function main() { return 1 }",
            "\u{FEFF}async function main() { return 'é' }",
            "\u{FEFF}async (api) => 'é'",
            "\u{FEFF}\u{FEFF}return 1;",
        ] {
            let program = compile(code).unwrap();
            assert!(program.call_entry, "{}", program.js);
        }
    }

    #[test]
    fn the_guard_keeps_the_models_columns() {
        let code = "async function main() { const x = 1; throw new Error('here') }";
        let program = compile(code).unwrap();
        let js_line = program
            .js
            .lines()
            .position(|l| l.contains("throw"))
            .unwrap() as u32
            + 1;
        let column = program
            .js
            .lines()
            .nth(js_line as usize - 1)
            .unwrap()
            .find("throw")
            .unwrap();
        let (line, column) = program.map_position(js_line, column as u32 + 1).unwrap();
        assert_eq!((line, column), (1, code.find("throw").unwrap() as u32 + 1));
    }

    #[test]
    fn lone_arrow_becomes_default() {
        let program = compile("async (api) => { return 2 }").unwrap();
        assert!(
            program.js.starts_with("export default (async (api)=>"),
            "{}",
            program.js
        );
    }

    #[test]
    fn imports_are_hoisted_out_of_the_body() {
        let (imports, body) = hoist_imports("import { api } from \"sdkbox\";\nreturn 1;");
        assert_eq!(imports, "import { api } from \"sdkbox\"; ");
        assert_eq!(body, "\nreturn 1;");
        let program = compile("import {\n  api as sdk,\n} from \"sdkbox\";\nreturn sdk;").unwrap();
        assert!(program.js.starts_with("import"), "{}", program.js);
        // Lines that start like an import but are not one stay where they are.
        let code = "import fs\nreturn 1;";
        assert_eq!(hoist_imports(code), (String::new(), code.to_owned()));
    }

    #[test]
    fn syntax_error_points_at_the_models_line() {
        let error = compile("const a = 1;\nconst b = (a;\nreturn b;")
            .err()
            .unwrap();
        assert_eq!(error.line, 2, "{error:?}");
        assert!(
            error.excerpt.starts_with("2 | const b = (a;\n  | "),
            "{}",
            error.excerpt
        );
        assert!(error.excerpt.ends_with('^'));
    }
}
