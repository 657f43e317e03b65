//! The model's entry function, and the guard that makes it run at most once per execution.
//!
//! A module may hand sdkbox a function to call: its default export, or a declared `run` or
//! `main`. Models often also call it themselves (`const r = await main();`), and an entry
//! run twice sends every write twice. So two mechanisms, neither of which trusts the other:
//!
//! - a conservative static rule: when the script refers to the entry anywhere outside its own
//!   declaration (calls it, passes it on, awaits it in `Promise.all`, `run.call(...)`, through
//!   an alias), the script runs it and the harness never calls it;
//! - a guard at run time: the body of the default export and of every top-level `main` and
//!   `run` (followed through aliases and TypeScript casts, the implementation of an
//!   overloaded one) is wrapped in a call to the `sdkbox:entry` module's `once`, which runs
//!   each the first time and throws on any later call, whoever makes it (a recursive entry
//!   too: recurse through a helper). The harness reads the guard after the module has run:
//!   an entry the script already ran is not called again, and its result is the execution's.
//!   The guard's state lives in that module's own scope, which no script can reach or reset,
//!   and it relies on no prototype a script can patch; the name the bodies call it by is
//!   random per compilation, so nothing can shadow it. The model's module cannot import
//!   itself (see `loader.rs`).

use deno_ast::swc::ast::{
    BlockStmtOrExpr, Decl, DefaultDecl, Expr, Id, Ident, ModuleDecl, ModuleExportName, ModuleItem,
    Pat,
};
use deno_ast::swc::common::{Span, Spanned};
use deno_ast::swc::ecma_visit::{Visit, VisitWith};
use deno_ast::{ParsedSource, ProgramRef};

/// The module that holds the guard (served by the loader).
pub const GUARD_URL: &str = "sdkbox:entry";

/// The guard module: `once` runs a guarded function's body the first time and refuses it
/// afterwards; `outcome` tells the harness whether, and how, one ran. It is evaluated before
/// any of the model's code (the model's module imports it) and uses nothing the model could
/// patch afterwards: `Object.create` taken then, objects without a prototype, the `in`
/// operator (a patched `Map.prototype.has` once let `main` run twice).
pub const GUARD_MODULE: &str = r#"const create = Object.create;
const ran = create(null);
function record(key, value) {
  const entry = create(null);
  entry[key] = value;
  return entry;
}
export function once(name, body) {
  if (name in ran) {
    throw new TypeError(`${name}() was called a second time in this execution. sdkbox runs a script's entry functions (its default export, main and run) at most once per execution, so that their writes are sent once. Call it once (sdkbox calls the entry for you when the script does not), and give a function you call several times, or recursively, another name.`);
  }
  ran[name] = record("pending", true);
  try {
    const value = body();
    ran[name] = record("value", value);
    return value;
  } catch (error) {
    ran[name] = record("error", error);
    throw error;
  }
}
export function outcome(name) {
  return name in ran ? ran[name] : undefined;
}
"#;

/// Aliases followed at most from a default export to the function it names.
const MAX_ALIASES: usize = 8;

/// What the compiler does with the model's entry functions.
pub struct Entry {
    /// Insertions into the model's source, `(byte offset, text)`, in order: they wrap the
    /// guarded functions' bodies.
    pub patches: Vec<(usize, String)>,
    /// The local name to export as the entry, when it is not the default export.
    pub export: Option<String>,
    /// Whether the script refers to the entry itself: then the harness never calls it.
    pub script_calls: bool,
    /// The entry's name in the guard, when it is guarded.
    pub guarded: Option<String>,
}

/// A function that may be the entry: where it is declared, its bindings, its body.
#[derive(Clone, Copy)]
struct Candidate<'a> {
    /// Its local binding, if it has one.
    id: Option<&'a Ident>,
    /// The whole declaration: uses inside it (recursion) are the guard's business.
    declaration: Span,
    function: Option<Body<'a>>,
}

/// A function's body, and what kind of function it is.
#[derive(Clone, Copy)]
struct Body<'a> {
    body: BodyKind<'a>,
    is_async: bool,
    is_generator: bool,
}

#[derive(Clone, Copy)]
enum BodyKind<'a> {
    Block(Span),
    Expr(&'a Expr),
}

impl Candidate<'_> {
    fn name(&self) -> String {
        self.id
            .map_or_else(|| "default".to_owned(), |id| id.sym.to_string())
    }
}

/// Finds the entry of a module and the functions to guard: the default export, else a
/// declared `run` or `main` (of the two, the one the other does not use; `run` when neither
/// uses the other) is the entry; the default export and every declared `main` and `run` are
/// guarded. `guard` is the name the wrapped bodies call `once` by.
pub fn find(parsed: &ParsedSource, guard: &str) -> Option<Entry> {
    let ProgramRef::Module(module) = parsed.program_ref() else {
        return None;
    };
    let start = parsed.text_info_lazy().range().start.as_byte_pos().0 as usize;
    let body = &module.body;
    let (run, main) = (declared(body, "run"), declared(body, "main"));
    let default = default_export(body);
    if default.is_none() && run.is_none() && main.is_none() {
        return None;
    }
    // The entry, and the names it is known by (its aliases included).
    let (entry, names, export) = match &default {
        Some(Default::Function(candidate, names)) => (Some(*candidate), names.clone(), None),
        Some(Default::Other(_)) => (None, Vec::new(), None),
        None => {
            let chosen = match (run, main) {
                (Some(run), Some(main)) => {
                    let main_uses_run = run.id.is_some_and(|id| {
                        !uses(module, &[id.to_id()], &[], Some(main.declaration)).is_empty()
                    });
                    if main_uses_run { main } else { run }
                }
                (Some(one), None) | (None, Some(one)) => one,
                (None, None) => return None,
            };
            let names: Vec<Id> = chosen.id.map(Ident::to_id).into_iter().collect();
            let export = chosen.id.map(|id| id.sym.to_string());
            (Some(chosen), names, export)
        }
    };
    let script_calls =
        entry.is_some_and(|entry| !uses(module, &names, &[entry.declaration], None).is_empty());
    // The entry is guarded; so is a `run` or `main` (or a function the default export
    // names) that the script uses outside the entry, but not a helper only the entry calls.
    let mut guarded: Vec<Candidate<'_>> = entry.into_iter().collect();
    let referenced = match &default {
        Some(Default::Other(functions)) => functions.clone(),
        _ => Vec::new(),
    };
    for candidate in [run, main].into_iter().flatten().chain(referenced) {
        if guarded
            .iter()
            .any(|g| g.declaration == candidate.declaration)
        {
            continue;
        }
        let outside: Vec<Span> = entry
            .iter()
            .map(|e| e.declaration)
            .chain([candidate.declaration])
            .collect();
        let used_elsewhere = candidate
            .id
            .is_some_and(|id| !uses(module, &[id.to_id()], &outside, None).is_empty());
        if used_elsewhere || entry.is_none() {
            guarded.push(candidate);
        }
    }
    let mut patches: Vec<(usize, String)> = guarded
        .iter()
        .filter_map(|c| {
            let function = c.function.filter(|f| !f.is_generator)?;
            Some(wrap(&function, &c.name(), guard, start))
        })
        .flatten()
        .collect();
    patches.sort_by_key(|(at, _)| *at);
    let entry_guarded = entry.filter(|e| e.function.is_some_and(|f| !f.is_generator));
    Some(Entry {
        patches,
        export,
        script_calls,
        guarded: entry_guarded.map(|e| e.name()),
    })
}

/// The insertions that make `function`'s body `return guard("name", () => { body })`.
fn wrap(function: &Body<'_>, name: &str, guard: &str, start: usize) -> Vec<(usize, String)> {
    let arrow = if function.is_async {
        "async () =>"
    } else {
        "() =>"
    };
    let at = |pos: u32| (pos as usize).saturating_sub(start);
    match function.body {
        BodyKind::Block(span) => vec![
            (
                at(span.lo.0) + 1,
                format!("return {guard}({name:?}, {arrow} {{"),
            ),
            (at(span.hi.0).saturating_sub(1), "});".to_owned()),
        ],
        BodyKind::Expr(expr) => {
            let span = expr.span();
            vec![
                (at(span.lo.0), format!("{guard}({name:?}, {arrow} (")),
                (at(span.hi.0), "))".to_owned()),
            ]
        }
    }
}

enum Default<'a> {
    /// A function: written in the export itself or named by it (followed through aliases),
    /// and the bindings it is known by.
    Function(Candidate<'a>, Vec<Id>),
    /// Something else (an object, a class, a call, `f.bind(..)`): the harness takes it as
    /// it is; the top-level functions it names are guarded.
    Other(Vec<Candidate<'a>>),
}

fn default_export(body: &[ModuleItem]) -> Option<Default<'_>> {
    for item in body {
        let ModuleItem::ModuleDecl(decl) = item else {
            continue;
        };
        match decl {
            ModuleDecl::ExportDefaultDecl(export) => {
                return Some(match &export.decl {
                    DefaultDecl::Fn(f) => {
                        let candidate = Candidate {
                            id: f.ident.as_ref(),
                            declaration: export.span,
                            function: f.function.body.as_ref().map(|b| Body {
                                body: BodyKind::Block(b.span),
                                is_async: f.function.is_async,
                                is_generator: f.function.is_generator,
                            }),
                        };
                        let names = f.ident.iter().map(Ident::to_id).collect();
                        Default::Function(candidate, names)
                    }
                    _ => Default::Other(Vec::new()),
                });
            }
            ModuleDecl::ExportDefaultExpr(export) => {
                return Some(match uncast(&export.expr) {
                    Expr::Ident(ident) => named(body, ident),
                    expr => match function_body(expr) {
                        Some(function) => Default::Function(
                            Candidate {
                                id: None,
                                declaration: export.span,
                                function: Some(function),
                            },
                            Vec::new(),
                        ),
                        None => Default::Other(named_functions(body, expr)),
                    },
                });
            }
            ModuleDecl::ExportNamed(named_export) if named_export.src.is_none() => {
                for specifier in &named_export.specifiers {
                    let is_default = |name: &ModuleExportName| match name {
                        ModuleExportName::Ident(ident) => ident.sym == "default",
                        ModuleExportName::Str(text) => &*text.value == "default",
                    };
                    if let deno_ast::swc::ast::ExportSpecifier::Named(s) = specifier
                        && s.exported.as_ref().is_some_and(is_default)
                        && let ModuleExportName::Ident(orig) = &s.orig
                    {
                        return Some(named(body, orig));
                    }
                }
            }
            _ => {}
        }
    }
    None
}

/// The top-level functions an expression names (`go.bind(null)`, `wrap(go)`).
fn named_functions<'a>(body: &'a [ModuleItem], expr: &Expr) -> Vec<Candidate<'a>> {
    struct Names(Vec<Id>);
    impl Visit for Names {
        fn visit_ident(&mut self, ident: &Ident) {
            self.0.push(ident.to_id());
        }
    }
    let mut names = Names(Vec::new());
    expr.visit_with(&mut names);
    names
        .0
        .iter()
        .filter_map(
            |id| match named(body, &Ident::new(id.0.clone(), Span::default(), id.1)) {
                Default::Function(candidate, _) => Some(candidate),
                Default::Other(_) => None,
            },
        )
        .collect()
}

/// The function a default export names, followed through `const alias = other` aliases.
fn named<'a>(body: &'a [ModuleItem], ident: &Ident) -> Default<'a> {
    let mut names = vec![ident.to_id()];
    for _ in 0..MAX_ALIASES {
        let Some(last) = names.last() else {
            break;
        };
        let Some((candidate, alias)) = declared_id(body, last) else {
            return Default::Other(Vec::new());
        };
        match alias {
            Some(next) => names.push(next),
            None => return Default::Function(candidate, names),
        }
    }
    Default::Other(Vec::new())
}

/// An expression without parentheses and TypeScript's casts around it.
fn uncast(expr: &Expr) -> &Expr {
    match expr {
        Expr::Paren(inner) => uncast(&inner.expr),
        Expr::TsAs(inner) => uncast(&inner.expr),
        Expr::TsSatisfies(inner) => uncast(&inner.expr),
        Expr::TsNonNull(inner) => uncast(&inner.expr),
        Expr::TsTypeAssertion(inner) => uncast(&inner.expr),
        Expr::TsConstAssertion(inner) => uncast(&inner.expr),
        // `(0, go)` is `go`.
        Expr::Seq(seq) => seq.exprs.last().map_or(expr, |last| uncast(last)),
        other => other,
    }
}

/// The body of a function or arrow expression.
fn function_body(expr: &Expr) -> Option<Body<'_>> {
    match uncast(expr) {
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

/// The top-level function (or variable holding one) declared with this name; of an
/// overloaded function, the implementation.
fn declared<'a>(body: &'a [ModuleItem], name: &str) -> Option<Candidate<'a>> {
    let id = declarations(body).find_map(|decl| binding(decl, |id| id.sym == *name))?;
    match named(body, id) {
        Default::Function(candidate, _) => Some(candidate),
        Default::Other(_) => None,
    }
}

/// The binding a declaration makes that `matches`.
fn binding(decl: &Decl, matches: impl Fn(&Ident) -> bool) -> Option<&Ident> {
    match decl {
        Decl::Fn(f) if matches(&f.ident) => Some(&f.ident),
        Decl::Var(var) => var.decls.iter().find_map(|d| match &d.name {
            Pat::Ident(binding) if matches(&binding.id) => Some(&binding.id),
            _ => None,
        }),
        _ => None,
    }
}

/// The declaration of exactly this binding (a function with a body before a bodiless
/// overload), and, when it is a variable that holds another binding, that one.
fn declared_id<'a>(body: &'a [ModuleItem], id: &Id) -> Option<(Candidate<'a>, Option<Id>)> {
    let mut found = None;
    for decl in declarations(body) {
        match decl {
            Decl::Fn(f) if f.ident.to_id() == *id => {
                let candidate = Candidate {
                    id: Some(&f.ident),
                    declaration: join(f.ident.span, f.function.span),
                    function: f.function.body.as_ref().map(|b| Body {
                        body: BodyKind::Block(b.span),
                        is_async: f.function.is_async,
                        is_generator: f.function.is_generator,
                    }),
                };
                if candidate.function.is_some() {
                    return Some((candidate, None));
                }
                found = found.or(Some((candidate, None)));
            }
            Decl::Var(var) => {
                for d in &var.decls {
                    let Pat::Ident(binding) = &d.name else {
                        continue;
                    };
                    if binding.id.to_id() != *id {
                        continue;
                    }
                    let alias = d.init.as_deref().and_then(|init| match uncast(init) {
                        Expr::Ident(other) => Some(other.to_id()),
                        _ => None,
                    });
                    let candidate = Candidate {
                        id: Some(&binding.id),
                        declaration: d.span,
                        function: d.init.as_deref().and_then(function_body),
                    };
                    return Some((candidate, alias));
                }
            }
            _ => {}
        }
    }
    found
}

/// Where the module refers to any of the bindings `ids`, outside `outside` and, if given,
/// only inside `inside`. Exporting one (`export default main`, `export { main }`) is not a
/// use.
fn uses(
    module: &deno_ast::swc::ast::Module,
    ids: &[Id],
    outside: &[Span],
    inside: Option<Span>,
) -> Vec<Span> {
    let mut finder = Uses {
        ids,
        outside,
        inside,
        found: Vec::new(),
    };
    module.visit_with(&mut finder);
    finder.found
}

struct Uses<'a> {
    ids: &'a [Id],
    outside: &'a [Span],
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
        let same = self
            .ids
            .iter()
            .any(|id| ident.sym == id.0 && ident.ctxt == id.1);
        let excluded = self.outside.iter().any(|s| contains(*s, ident.span));
        let included = self.inside.is_none_or(|s| contains(s, ident.span));
        if same && !excluded && included {
            self.found.push(ident.span);
        }
    }

    fn visit_export_default_expr(&mut self, export: &deno_ast::swc::ast::ExportDefaultExpr) {
        if !matches!(uncast(&export.expr), Expr::Ident(_)) {
            export.visit_children_with(self);
        }
    }

    fn visit_named_export(&mut self, export: &deno_ast::swc::ast::NamedExport) {
        // `export { main }` names the binding; it does not use it.
        if export.src.is_some() {
            export.visit_children_with(self);
        }
    }

    fn visit_var_declarator(&mut self, declarator: &deno_ast::swc::ast::VarDeclarator) {
        // `const alias = main;`, where the alias is itself one of the names looked for (the
        // default export's chain), only names it again: the alias's own uses count.
        let in_chain = matches!(&declarator.name, Pat::Ident(binding)
            if self.ids.iter().any(|id| binding.id.sym == id.0 && binding.id.ctxt == id.1));
        let aliases = declarator
            .init
            .as_deref()
            .is_some_and(|init| matches!(uncast(init), Expr::Ident(_)));
        if !(in_chain && aliases) {
            declarator.visit_children_with(self);
        }
    }
}
