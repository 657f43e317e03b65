//! The model's entry function, and the guard that makes it run at most once per execution.
//!
//! A module may hand sdkbox a function to call: its default export, or a declared `run` or
//! `main`. Models often also call it themselves (`const r = await main();`), and an entry
//! run twice sends every write twice. So two mechanisms, neither of which trusts the other:
//!
//! - a conservative static rule: when the script refers to the entry anywhere outside its own
//!   declaration (calls it, passes it on, awaits it in `Promise.all`, `run.call(...)`), the
//!   script runs it and the harness never calls it;
//! - a guard at run time: the entry's body is wrapped in a call to the `sdkbox:entry`
//!   module's `once`, which runs it the first time and throws on any later call, whoever
//!   makes it. The harness reads the guard after the module has run: an entry the script
//!   already ran is not called again, and its result is the execution's. The guard's state
//!   lives in that module's own scope, which no script can reach or reset; the name the body
//!   calls it by is random per compilation, so no parameter or variable can shadow it.

use deno_ast::swc::ast::{
    BlockStmtOrExpr, Decl, DefaultDecl, Expr, Id, Ident, ModuleDecl, ModuleExportName, ModuleItem,
    Pat,
};
use deno_ast::swc::common::Span;
use deno_ast::swc::ecma_visit::{Visit, VisitWith};
use deno_ast::{ParsedSource, ProgramRef};

/// The module that holds the guard (served by the loader).
pub const GUARD_URL: &str = "sdkbox:entry";

/// The guard module: `once` runs the entry's body the first time and refuses it afterwards;
/// `outcome` tells the harness whether, and how, it ran.
pub const GUARD_MODULE: &str = r#"let ran;
export function once(name, body) {
  if (ran !== undefined) {
    throw new TypeError(`${name}() was called a second time in this execution. sdkbox runs a script's entry function (its default export, run or main) at most once per execution, so that its writes are sent once. Call it once (sdkbox calls it for you when the script does not), and give a function you call several times another name.`);
  }
  ran = { pending: true };
  try {
    const value = body();
    ran = { value };
    return value;
  } catch (error) {
    ran = { error };
    throw error;
  }
}
export function outcome() {
  return ran;
}
"#;

/// What the compiler does with the model's entry.
pub struct Entry {
    /// Insertions into the model's source, `(byte offset, text)`, in order: they wrap the
    /// entry's body in the guard.
    pub patches: Vec<(usize, String)>,
    /// The local name to export as the entry, when it is not the default export.
    pub export: Option<String>,
    /// Whether the script refers to the entry itself: then the harness never calls it.
    pub script_calls: bool,
}

/// A function that may be the entry: where it is declared, its name, its body.
struct Candidate<'a> {
    /// Its local binding, if it has one.
    id: Option<Id>,
    /// The whole declaration: references inside it (recursion) are the guard's business.
    declaration: Span,
    function: Option<Body<'a>>,
}

/// A function's body, and what kind of function it is.
struct Body<'a> {
    body: BodyKind<'a>,
    is_async: bool,
    is_generator: bool,
}

enum BodyKind<'a> {
    Block(Span),
    Expr(&'a Expr),
}

/// Finds the entry of a module, if it has one the harness could call: the default export,
/// else a declared `run` or `main` (of the two, the one the other does not use; `run` when
/// neither uses the other). `guard` is the name the wrapped body calls `once` by; `start` is
/// the byte position of the text's first character.
pub fn find(parsed: &ParsedSource, guard: &str) -> Option<Entry> {
    let ProgramRef::Module(module) = parsed.program_ref() else {
        return None;
    };
    let start = parsed.text_info_lazy().range().start.as_byte_pos().0 as usize;
    let declared = |name: &str| declared(&module.body, name);
    let (candidate, export) = match default_export(&module.body) {
        Some(Default::Function(candidate)) => (candidate, None),
        Some(Default::Named(id)) => (declared_id(&module.body, &id)?, None),
        Some(Default::Other) => return None,
        None => {
            let (run, main) = (declared("run"), declared("main"));
            let chosen = match (run, main) {
                (Some(run), Some(main)) => {
                    let main_uses_run = run.id.as_ref().is_some_and(|id| {
                        !references(module, id, None, Some(main.declaration)).is_empty()
                    });
                    if main_uses_run { main } else { run }
                }
                (Some(one), None) | (None, Some(one)) => one,
                (None, None) => return None,
            };
            let export = chosen.id.as_ref().map(|id| id.0.to_string());
            (chosen, export)
        }
    };
    let script_calls = candidate
        .id
        .as_ref()
        .is_some_and(|id| !references(module, id, Some(candidate.declaration), None).is_empty());
    let name = candidate
        .id
        .as_ref()
        .map_or_else(|| "default".to_owned(), |id| id.0.to_string());
    let patches = candidate
        .function
        .as_ref()
        .filter(|f| !f.is_generator)
        .map(|f| wrap(f, &name, guard, start))
        .unwrap_or_default();
    Some(Entry {
        patches,
        export,
        script_calls,
    })
}

/// The insertions that make `function`'s body `return guard("name", () => { body })`.
fn wrap(function: &Body<'_>, name: &str, guard: &str, start: usize) -> Vec<(usize, String)> {
    let arrow = if function.is_async {
        "async () =>"
    } else {
        "() =>"
    };
    let at = |pos: u32| pos as usize - start;
    match function.body {
        BodyKind::Block(span) => vec![
            (
                at(span.lo.0) + 1,
                format!("return {guard}({name:?}, {arrow} {{"),
            ),
            (at(span.hi.0) - 1, "});".to_owned()),
        ],
        BodyKind::Expr(expr) => {
            let span = span_of(expr);
            vec![
                (at(span.lo.0), format!("{guard}({name:?}, {arrow} (")),
                (at(span.hi.0), "))".to_owned()),
            ]
        }
    }
}

fn span_of(expr: &Expr) -> Span {
    use deno_ast::swc::common::Spanned;
    expr.span()
}

enum Default<'a> {
    /// A function or arrow written in the export itself.
    Function(Candidate<'a>),
    /// `export default main;` or `export { main as default }`.
    Named(Id),
    /// Something else (an object, a class, a call): the harness takes it as it is.
    Other,
}

fn default_export(body: &[ModuleItem]) -> Option<Default<'_>> {
    for item in body {
        let ModuleItem::ModuleDecl(decl) = item else {
            continue;
        };
        match decl {
            ModuleDecl::ExportDefaultDecl(export) => {
                return Some(match &export.decl {
                    DefaultDecl::Fn(f) => Default::Function(Candidate {
                        id: f.ident.as_ref().map(Ident::to_id),
                        declaration: export.span,
                        function: f.function.body.as_ref().map(|b| Body {
                            body: BodyKind::Block(b.span),
                            is_async: f.function.is_async,
                            is_generator: f.function.is_generator,
                        }),
                    }),
                    _ => Default::Other,
                });
            }
            ModuleDecl::ExportDefaultExpr(export) => {
                return Some(match unparen(&export.expr) {
                    Expr::Ident(ident) => Default::Named(ident.to_id()),
                    expr => match function_body(expr) {
                        Some(function) => Default::Function(Candidate {
                            id: None,
                            declaration: export.span,
                            function: Some(function),
                        }),
                        None => Default::Other,
                    },
                });
            }
            ModuleDecl::ExportNamed(named) if named.src.is_none() => {
                for specifier in &named.specifiers {
                    if let deno_ast::swc::ast::ExportSpecifier::Named(s) = specifier
                        && let Some(ModuleExportName::Ident(exported)) = &s.exported
                        && exported.sym == "default"
                        && let ModuleExportName::Ident(orig) = &s.orig
                    {
                        return Some(Default::Named(orig.to_id()));
                    }
                }
            }
            _ => {}
        }
    }
    None
}

fn unparen(expr: &Expr) -> &Expr {
    match expr {
        Expr::Paren(inner) => unparen(&inner.expr),
        other => other,
    }
}

/// The body of a function or arrow expression.
fn function_body(expr: &Expr) -> Option<Body<'_>> {
    match unparen(expr) {
        Expr::Fn(f) => f.function.body.as_ref().map(|b| Body {
            body: BodyKind::Block(b.span),
            is_async: f.function.is_async,
            is_generator: f.function.is_generator,
        }),
        Expr::Arrow(arrow) => Some(Body {
            body: match &*arrow.body {
                BlockStmtOrExpr::BlockStmt(block) => BodyKind::Block(block.span),
                BlockStmtOrExpr::Expr(expr) => BodyKind::Expr(expr),
            },
            is_async: arrow.is_async,
            is_generator: arrow.is_generator,
        }),
        _ => None,
    }
}

/// The top-level declarations of the module, exported or not.
fn declarations(body: &[ModuleItem]) -> impl Iterator<Item = &Decl> {
    body.iter().filter_map(|item| match item {
        ModuleItem::ModuleDecl(ModuleDecl::ExportDecl(export)) => Some(&export.decl),
        ModuleItem::Stmt(deno_ast::swc::ast::Stmt::Decl(decl)) => Some(decl),
        _ => None,
    })
}

/// The top-level function (or variable) declared with this name.
fn declared<'a>(body: &'a [ModuleItem], name: &str) -> Option<Candidate<'a>> {
    declarations(body).find_map(|decl| candidate(decl, |id| id.sym == *name))
}

/// The top-level declaration of exactly this binding.
fn declared_id<'a>(body: &'a [ModuleItem], id: &Id) -> Option<Candidate<'a>> {
    declarations(body).find_map(|decl| candidate(decl, |ident| ident.to_id() == *id))
}

fn candidate<'a>(decl: &'a Decl, matches: impl Fn(&Ident) -> bool) -> Option<Candidate<'a>> {
    match decl {
        Decl::Fn(f) if matches(&f.ident) => Some(Candidate {
            id: Some(f.ident.to_id()),
            declaration: join(f.ident.span, f.function.span),
            function: f.function.body.as_ref().map(|b| Body {
                body: BodyKind::Block(b.span),
                is_async: f.function.is_async,
                is_generator: f.function.is_generator,
            }),
        }),
        Decl::Var(var) => var.decls.iter().find_map(|d| match &d.name {
            Pat::Ident(binding) if matches(&binding.id) => Some(Candidate {
                id: Some(binding.id.to_id()),
                declaration: d.span,
                function: d.init.as_deref().and_then(function_body),
            }),
            _ => None,
        }),
        _ => None,
    }
}

/// Where the module refers to the binding `id`, outside `outside` and, if given, only
/// inside `inside`. Exporting it (`export default main`, `export { main }`) is not a use.
fn references(
    module: &deno_ast::swc::ast::Module,
    id: &Id,
    outside: Option<Span>,
    inside: Option<Span>,
) -> Vec<Span> {
    let mut finder = Uses {
        id,
        outside,
        inside,
        found: Vec::new(),
    };
    module.visit_with(&mut finder);
    finder.found
}

struct Uses<'a> {
    id: &'a Id,
    outside: Option<Span>,
    inside: Option<Span>,
    found: Vec<Span>,
}

/// The smallest span holding both.
fn join(a: Span, b: Span) -> Span {
    Span::new(a.lo.min(b.lo), a.hi.max(b.hi))
}

fn contains(outer: Span, inner: Span) -> bool {
    outer.lo <= inner.lo && inner.hi <= outer.hi
}

impl Visit for Uses<'_> {
    fn visit_ident(&mut self, ident: &Ident) {
        let same = ident.sym == self.id.0 && ident.ctxt == self.id.1;
        let excluded = self.outside.is_some_and(|s| contains(s, ident.span));
        let included = self.inside.is_none_or(|s| contains(s, ident.span));
        if same && !excluded && included {
            self.found.push(ident.span);
        }
    }

    fn visit_export_default_expr(&mut self, export: &deno_ast::swc::ast::ExportDefaultExpr) {
        if !matches!(unparen(&export.expr), Expr::Ident(_)) {
            export.visit_children_with(self);
        }
    }

    fn visit_named_export(&mut self, export: &deno_ast::swc::ast::NamedExport) {
        // `export { main }` names the binding; it does not use it.
        if export.src.is_some() {
            export.visit_children_with(self);
        }
    }
}
