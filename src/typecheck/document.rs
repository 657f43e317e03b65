//! The model's code as the compiler checks it: as a module when it is one, else as the body
//! of an async function (as the sandbox runs it, but with `api` the declared global rather
//! than an untyped parameter), with where its SDK calls are, so that only what is certainly
//! wrong about them blocks a run.

use deno_ast::swc::ast::{CallExpr, Callee, Expr, MemberExpr, MemberProp, Pat, Prop, PropOrSpread};
use deno_ast::swc::common::Spanned;
use deno_ast::swc::ecma_visit::{Visit, VisitWith};
use deno_ast::{MediaType, ModuleSpecifier, ParseParams};

/// The document the compiler checks, and how to find the model's lines and SDK calls in it.
pub struct Document {
    /// The text checked.
    pub text: String,
    /// Lines of the text above the model's first line.
    pub offset: u32,
    /// Whether the code parses in neither style the sandbox reads (so the sandbox refuses it
    /// too).
    pub unparsable: bool,
    /// What the check added to the code (`: SdkboxApi`, a raw request's type): line, UTF-16
    /// column and width in the checked text.
    inserted: Vec<(u32, u32, u32)>,
    /// Byte ranges of the text that are an SDK name (`api.customers.list`), with the name
    /// when it is written with plain identifiers.
    names: Vec<(usize, usize, Option<String>)>,
    /// Byte ranges of the text that are an SDK call, arguments included.
    calls: Vec<(usize, usize)>,
    /// Object literals written as an SDK call's arguments.
    literal_arguments: Vec<(usize, usize)>,
    /// Literal values written in an SDK call's arguments (`status: "payed"`, key included).
    literal_values: Vec<(usize, usize)>,
    /// Property names that are called (`list.filter` in `list.filter(...)`), anywhere.
    called: Vec<(usize, usize)>,
    /// What an SDK call returned, indexed (`runs[0]`).
    indexed_responses: Vec<(usize, usize)>,
    /// Those of them called on what an SDK call returned (`runs.filter(...)` after
    /// `const runs = await api.actions.listRuns(...)`, or on `(await api...)` itself).
    called_on_responses: Vec<(usize, usize)>,
    /// `api.request` calls with a literal method and path.
    pub raw_requests: Vec<super::routes::RawRequest>,
    /// `fetch` calls with a literal method and URL, the URL as written (scheme and host
    /// included when it has them).
    pub fetches: Vec<super::routes::RawRequest>,
    /// Numbers with a fraction written as a top-level parameter of an SDK call written from
    /// `api`: the call's group and method, the key, the value, and where it is (line and
    /// UTF-16 character in the checked text).
    pub fractions: Vec<(String, String, String, f64, u32, u32)>,
    /// Top-level parameters of SDK calls written from `api` computed with a fraction: the
    /// call's group and method, the key, and where the value is (line and UTF-16 character).
    pub computed_fractions: Vec<(String, String, String, u32, u32)>,
    /// SDK calls written from `api` with arguments after the parameters object, which the
    /// run-time SDK refuses (another SDK's positional form, `update(id, { ... })`).
    pub positional: Vec<Positional>,
    /// First arguments of SDK calls written from `api` (the parameters object's place).
    first_arguments: Vec<(usize, usize)>,
    /// What the code's values flow through, for [`super::flow`].
    pub flow: super::flow::Flow,
    /// Names of the types the code declares itself (interfaces, aliases, classes, enums,
    /// type parameters): a message naming one may not be about the SDK's.
    pub declared_types: std::collections::HashSet<String>,
    /// Property names the code gives values itself (`x.total = ...`, `{ total() {} }`): a
    /// value may have them whatever its declared type says.
    pub assigned_names: std::collections::HashSet<String>,
    /// Those of them given by assigning a member (`params.customer = ...`): an object built
    /// before an SDK call may get them after its type was inferred.
    pub member_assigned: std::collections::HashSet<String>,
    line_starts: Vec<usize>,
}

/// An SDK call given more than its one parameters object: its group and method, how many
/// arguments it was given, where the second one is (line and UTF-16 character in the checked
/// text), and the call's byte range.
pub struct Positional {
    /// The call's group (`customers`).
    pub group: String,
    /// The call's method (`update`).
    pub method: String,
    /// How many arguments it was given.
    pub arguments: usize,
    /// The second argument's line in the checked text.
    pub line: u32,
    /// The second argument's UTF-16 character on its line.
    pub character: u32,
    call: (usize, usize),
}

const REFERENCE: &str = "/// <reference path=\"./sdk.d.ts\" />\n";

/// What an untyped parameter named `api` is given, so that entry functions (`main(api)`,
/// `run(api)`, `async (api) => ...`) and helpers handed the SDK are checked against it.
const TYPED: &str = ": SdkboxApi";

/// What a raw request returns, as a TypeScript type, when the spec says surely: given its
/// method and written path (see [`super::routes::operation`]).
pub type RouteType<'a> = &'a dyn Fn(&str, &[super::routes::Part]) -> Option<String>;

/// `text` with what the check adds for the compiler: `: SdkboxApi` after every untyped
/// parameter named `api`, and a raw request the spec types given that type
/// (`api.request<Awaited<ReturnType<...>>>("GET", "/orders/x")`), with where each addition went
/// (line, UTF-16 character and width in the new text).
fn annotated(text: String, route_type: RouteType<'_>) -> (String, Vec<(u32, u32, u32)>) {
    let Some(parsed) = parse(&text) else {
        return (text, Vec::new());
    };
    let mut calls = Handed::default();
    parsed.program_ref().visit_with(&mut calls);
    let mut found = Insertions {
        start: deno_ast::StartSourcePos::START_SOURCE_POS.as_byte_pos().0,
        at: Vec::new(),
        route_type,
        handed: calls.always(),
    };
    parsed.program_ref().visit_with(&mut found);
    if found.at.is_empty() {
        return (text, Vec::new());
    }
    found.at.sort_by_key(|(at, _)| *at);
    let mut out =
        String::with_capacity(text.len() + found.at.iter().map(|(_, a)| a.len()).sum::<usize>());
    let mut inserted = Vec::new();
    let mut last = 0;
    for (at, added) in found.at {
        out.push_str(&text[last..at]);
        let line = out.matches('\n').count() as u32;
        let line_start = out.rfind('\n').map_or(0, |i| i + 1);
        let column = out[line_start..].encode_utf16().count() as u32;
        inserted.push((line, column, added.encode_utf16().count() as u32));
        out.push_str(&added);
        last = at;
    }
    out.push_str(&text[last..]);
    (out, inserted)
}

/// An SDK call given more than its parameters object, as the parser found it: group, method,
/// how many arguments, where the second starts, the call's range (parser positions).
struct Found {
    group: String,
    method: String,
    arguments: usize,
    second: u32,
    call: (u32, u32),
}

/// What [`annotated`] adds, and where (byte offsets of the text).
struct Insertions<'a> {
    start: u32,
    at: Vec<(usize, String)>,
    route_type: RouteType<'a>,
    /// The code's functions, by name, and the parameters every call of them hands `api`.
    handed: std::collections::HashMap<String, std::collections::BTreeSet<usize>>,
}

impl Insertions<'_> {
    /// Types an untyped parameter named `api`.
    fn pattern(&mut self, pat: &Pat) {
        if let Pat::Ident(binding) = pat
            && binding.id.sym.as_ref() == "api"
            && binding.type_ann.is_none()
        {
            let at = binding.id.span.hi.0.saturating_sub(self.start) as usize;
            self.at.push((at, TYPED.to_owned()));
        }
    }

    /// Types the untyped parameters (not named `api`, typed already) of the function `name`
    /// that every call of it hands `api`: `function purge(cf) { ... }` called `purge(api)`.
    fn handed_api<'p>(
        &mut self,
        name: &deno_ast::swc::ast::Ident,
        params: impl Iterator<Item = &'p Pat>,
    ) {
        let Some(indices) = self.handed.get(&super::flow::resolved(name)).cloned() else {
            return;
        };
        for (index, pat) in params.enumerate() {
            if let Pat::Ident(binding) = pat
                && indices.contains(&index)
                && binding.id.sym.as_ref() != "api"
                && binding.type_ann.is_none()
            {
                let at = binding.id.span.hi.0.saturating_sub(self.start) as usize;
                self.at.push((at, TYPED.to_owned()));
            }
        }
    }
}

/// The calls of the code's own functions by their binding (`purge(api, zone)`), and at which
/// arguments each hands `api` itself; and the functions used otherwise than called (handed
/// to `map`, stored), whose parameters may be given anything.
#[derive(Default)]
struct Handed {
    calls: std::collections::HashMap<String, Vec<Vec<bool>>>,
    escaped: std::collections::HashSet<String>,
}

impl Handed {
    /// The parameters every call of a function hands `api` at, by the function's binding.
    fn always(self) -> std::collections::HashMap<String, std::collections::BTreeSet<usize>> {
        let escaped = self.escaped;
        self.calls
            .into_iter()
            .filter(|(name, _)| !escaped.contains(name))
            .map(|(name, calls)| {
                let longest = calls.iter().map(Vec::len).max().unwrap_or(0);
                let indices = (0..longest)
                    .filter(|i| calls.iter().all(|call| call.get(*i) == Some(&true)))
                    .collect();
                (name, indices)
            })
            .collect()
    }
}

impl Visit for Handed {
    fn visit_call_expr(&mut self, call: &CallExpr) {
        if let Callee::Expr(callee) = &call.callee
            && let Expr::Ident(name) = &**callee
        {
            let api: Vec<bool> = call
                .args
                .iter()
                .map(|arg| {
                    arg.spread.is_none()
                        && matches!(&*arg.expr, Expr::Ident(given) if given.sym.as_ref() == "api")
                })
                .collect();
            self.calls
                .entry(super::flow::resolved(name))
                .or_default()
                .push(api);
            // The callee itself is called, not used otherwise.
            call.args.visit_with(self);
            return;
        }
        call.visit_children_with(self);
    }

    fn visit_expr(&mut self, expr: &Expr) {
        if let Expr::Ident(name) = expr {
            self.escaped.insert(super::flow::resolved(name));
        }
        expr.visit_children_with(self);
    }
}

impl Visit for Insertions<'_> {
    fn visit_call_expr(&mut self, call: &CallExpr) {
        // Typed by a type argument after `api.request` (nothing is wrapped, so no line of the
        // code is joined to the one before), unless the code gives one, or options whose
        // headers may ask for another representation (a diff, raw bytes).
        if let Some((method, parts, _)) = raw_request(call, &|_| None)
            && call.type_args.is_none()
            && plain_options(&call.args[2..])
            && let Callee::Expr(callee) = &call.callee
            && let Some(ty) = (self.route_type)(&method, &parts)
        {
            let at = callee.span().hi.0.saturating_sub(self.start) as usize;
            self.at.push((at, format!("<Awaited<{ty}>>")));
        }
        call.visit_children_with(self);
    }

    fn visit_param(&mut self, param: &deno_ast::swc::ast::Param) {
        self.pattern(&param.pat);
        param.visit_children_with(self);
    }

    fn visit_fn_decl(&mut self, decl: &deno_ast::swc::ast::FnDecl) {
        let params = decl.function.params.iter().map(|p| &p.pat);
        self.handed_api(&decl.ident, params);
        decl.visit_children_with(self);
    }

    fn visit_var_declarator(&mut self, declarator: &deno_ast::swc::ast::VarDeclarator) {
        if let Pat::Ident(name) = &declarator.name
            && let Some(init) = &declarator.init
        {
            match &**init {
                Expr::Arrow(arrow) => self.handed_api(&name.id, arrow.params.iter()),
                Expr::Fn(function) => {
                    let params = function.function.params.iter().map(|p| &p.pat);
                    self.handed_api(&name.id, params);
                }
                _ => {}
            }
        }
        declarator.visit_children_with(self);
    }

    fn visit_arrow_expr(&mut self, arrow: &deno_ast::swc::ast::ArrowExpr) {
        for pat in &arrow.params {
            self.pattern(pat);
        }
        arrow.visit_children_with(self);
    }
}

impl Document {
    /// The document for `code`, raw requests untyped.
    #[cfg(test)]
    pub fn new(code: &str) -> Self {
        Self::typed(code, &|_, _| None)
    }

    /// The document for `code`, a raw request typed by `route_type` where it says.
    pub fn typed(code: &str, route_type: RouteType<'_>) -> Self {
        let code = code.trim_start_matches('\u{FEFF}');
        let as_module = parse(code).is_some();
        let (text, offset) = match as_module {
            true => (format!("{REFERENCE}{}\nexport {{}};\n", closed(code)), 1),
            false => (
                format!(
                    "{REFERENCE}export default async function __sdkbox_check() {{\n{}\n}}\n",
                    closed(code)
                ),
                2,
            ),
        };
        let (text, inserted) = annotated(text, route_type);
        let parsed = parse(&text);
        let unparsable = !as_module && parsed.is_none();
        let start = deno_ast::StartSourcePos::START_SOURCE_POS.as_byte_pos().0;
        let mut spans = Spans {
            start,
            ..Spans::default()
        };
        if let Some(parsed) = parsed {
            // Names for the SDK first, so that a function written before the alias it uses
            // (`function make() { return stripe.x.create(...) }` above `const stripe = api`)
            // has its calls seen as the SDK's.
            let mut names = Spans {
                start,
                ..Spans::default()
            };
            parsed.program_ref().visit_with(&mut names);
            spans.sdk_aliases = names.sdk_aliases;
            spans.not_sdk = names.not_sdk;
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
        // A byte offset of the parsed text as a 0-based line and UTF-16 character.
        let position = |at: u32| {
            let at = at.saturating_sub(start) as usize;
            let line = line_starts.partition_point(|s| *s <= at).saturating_sub(1);
            let character = text
                .get(line_starts[line]..at)
                .map_or(0, |before| before.encode_utf16().count());
            (line as u32, character as u32)
        };
        let located = |found: Vec<Located>| {
            found
                .into_iter()
                .map(|(method, path, at, body)| {
                    let (line, character) = position(at);
                    let body = body
                        .into_iter()
                        .map(|(key, value, at)| {
                            let (line, character) = position(at);
                            (key, value, line, character)
                        })
                        .collect();
                    super::routes::RawRequest {
                        method,
                        path,
                        line,
                        character,
                        body,
                    }
                })
                .collect::<Vec<_>>()
        };
        let raw_requests = located(spans.raw_requests);
        let fetches = located(spans.fetches);
        let fractions = spans
            .fractions
            .into_iter()
            .map(|(group, method, key, value, at)| {
                let (line, character) = position(at);
                (group, method, key, value, line, character)
            })
            .collect();
        let computed_fractions = spans
            .computed_fractions
            .into_iter()
            .map(|(group, method, key, at)| {
                let (line, character) = position(at);
                (group, method, key, line, character)
            })
            .collect();
        let positional = spans
            .positional
            .into_iter()
            .map(|found| {
                let (line, character) = position(found.second);
                Positional {
                    group: found.group,
                    method: found.method,
                    arguments: found.arguments,
                    line,
                    character,
                    call: to_range(found.call),
                }
            })
            .collect();
        Self {
            raw_requests,
            fetches,
            fractions,
            computed_fractions,
            positional,
            first_arguments: spans.first_arguments.into_iter().map(to_range).collect(),
            flow: super::flow::Flow {
                bindings: spans
                    .bindings
                    .into_iter()
                    .map(|(name, from)| (name, to_range(from)))
                    .collect(),
                uses: spans
                    .uses
                    .into_iter()
                    .map(|(name, at)| (name, to_range((at, at)).0))
                    .collect(),
                calls: spans
                    .sdk_arguments
                    .into_iter()
                    .map(|(call, arguments)| (call, to_range(arguments)))
                    .collect(),
                guards: spans.guards.into_iter().map(to_range).collect(),
            },
            declared_types: spans.declared_types,
            assigned_names: spans.assigned_names,
            member_assigned: spans.member_assigned,
            names: spans
                .names
                .into_iter()
                .map(|(lo, hi, name)| {
                    let (lo, hi) = to_range((lo, hi));
                    (lo, hi, name)
                })
                .collect(),
            calls: spans.calls.into_iter().map(to_range).collect(),
            literal_arguments: spans.literal_arguments.into_iter().map(to_range).collect(),
            literal_values: spans.literal_values.into_iter().map(to_range).collect(),
            called: spans.called.into_iter().map(to_range).collect(),
            called_on_responses: spans
                .called_on_responses
                .into_iter()
                .map(to_range)
                .collect(),
            indexed_responses: spans.indexed_responses.into_iter().map(to_range).collect(),
            line_starts,
            text,
            offset,
            unparsable,
            inserted,
        }
    }

    /// A UTF-16 column of the checked text as a column of the model's line: the annotations
    /// sdkbox added before it taken out.
    pub fn model_character(&self, line: u32, character: u32) -> u32 {
        let before = self
            .inserted
            .iter()
            .filter(|(l, c, _)| *l == line && *c < character)
            .map(|(_, c, width)| (character - c).min(*width))
            .sum::<u32>();
        character - before
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

    /// Whether a position is in what an SDK call returned, indexed (`runs[0]`).
    pub fn in_indexed_response(&self, line: u32, character: u32) -> bool {
        self.within(&self.indexed_responses, line, character)
    }

    /// Whether a position is in an SDK call (its arguments included).
    pub fn in_sdk_call(&self, line: u32, character: u32) -> bool {
        self.within(&self.calls, line, character)
    }

    /// Whether a position is where an object literal written as an SDK call's argument
    /// starts (the compiler puts the whole argument's mismatch there).
    pub fn starts_sdk_literal_argument(&self, line: u32, character: u32) -> bool {
        self.at(line, character)
            .is_some_and(|at| self.literal_arguments.iter().any(|(lo, _)| *lo == at))
    }

    /// Whether a position is in an object literal written as an SDK call's argument.
    pub fn at_sdk_literal_argument(&self, line: u32, character: u32) -> bool {
        self.within(&self.literal_arguments, line, character)
    }

    /// Whether a position is at a literal value written in an SDK call's arguments.
    pub fn at_sdk_literal_value(&self, line: u32, character: u32) -> bool {
        self.within(&self.literal_values, line, character)
    }

    /// The byte offset in the checked text of a 0-based line and UTF-16 character.
    pub fn offset_of(&self, line: u32, character: u32) -> Option<usize> {
        self.at(line, character)
    }

    /// Whether a position is where the first argument of an SDK call written from `api`
    /// starts (the compiler puts an argument's own mismatch there; one inside it, in a
    /// nested call, is elsewhere).
    pub fn at_sdk_first_argument(&self, line: u32, character: u32) -> bool {
        self.at(line, character)
            .is_some_and(|at| self.first_arguments.iter().any(|(lo, _)| *lo == at))
    }

    /// Whether a position is in an SDK call given more than its parameters object.
    pub fn in_positional_call(&self, line: u32, character: u32) -> bool {
        self.at(line, character).is_some_and(|at| {
            self.positional
                .iter()
                .any(|p| (p.call.0..p.call.1).contains(&at))
        })
    }

    /// Whether a position is at a property name that is called (`x.filter(...)`).
    pub fn at_called_property(&self, line: u32, character: u32) -> bool {
        self.within(&self.called, line, character)
    }

    /// Whether a position is at a property name called on what an SDK call returned.
    pub fn at_called_on_response(&self, line: u32, character: u32) -> bool {
        self.within(&self.called_on_responses, line, character)
    }

    fn within(&self, spans: &[(usize, usize)], line: u32, character: u32) -> bool {
        self.at(line, character)
            .is_some_and(|at| spans.iter().any(|(lo, hi)| (*lo..*hi).contains(&at)))
    }
}

/// The code with its leading imports (the sandbox loads none; `api` is a global here) and
/// triple-slash directives blanked, lines kept. The compiler resolves nothing besides
/// (`noResolve`), so no import elsewhere in the code reads a file either.
fn closed(code: &str) -> String {
    let mut lines = Vec::new();
    let mut in_import = false;
    let mut preamble = true;
    for line in code.lines() {
        let trimmed = line.trim();
        // What a statement ends with, a trailing line comment left out.
        let ending = trimmed.split(" //").next().unwrap_or(trimmed).trim_end();
        let starts = ["import ", "import{", "import\"", "import'"]
            .iter()
            .any(|start| trimmed.starts_with(start));
        if trimmed.starts_with("///") {
            lines.push("");
        } else if preamble && (in_import || starts) {
            in_import = !(ending.ends_with(';') || ending.ends_with('"') || ending.ends_with('\''));
            lines.push("");
        } else {
            if !trimmed.is_empty() && !trimmed.starts_with("//") {
                preamble = false;
            }
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
        // Names resolved to their bindings (`x#2` is not `x#3`), for the flow of values.
        scope_analysis: true,
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
    literal_arguments: Vec<(u32, u32)>,
    literal_values: Vec<(u32, u32)>,
    called: Vec<(u32, u32)>,
    called_on_responses: Vec<(u32, u32)>,
    /// Variables holding what an SDK call returned (`const runs = await api...`), or parts of
    /// it (`const { data } = await api...`).
    responses: std::collections::HashSet<String>,
    /// `api.request` calls with a literal method and path: the method, the path, where the
    /// path starts.
    raw_requests: Vec<Located>,
    /// `fetch` calls with a literal method and URL.
    fetches: Vec<Located>,
    /// What an SDK call returned, indexed (`runs[0]`, `(await api.x.list())[0]`).
    indexed_responses: Vec<(u32, u32)>,
    /// Names a `const` binds to a literal string, and the string.
    constants: std::collections::HashMap<String, String>,
    /// Names bound to the SDK or one of its groups, and the SDK name each is (`api`,
    /// `api.issues`).
    sdk_aliases: std::collections::HashMap<String, String>,
    /// Bindings named `api` that are not the SDK (a parameter typed as something else).
    not_sdk: std::collections::HashSet<String>,
    /// Names bound to a number with a fraction, or computed with one (see
    /// [`Spans::computes_fraction`]).
    fractional: std::collections::HashSet<String>,
    /// Top-level parameters of SDK calls written from `api` whose value is computed with a
    /// fraction: group, method, key, where the value is (parser position).
    computed_fractions: Vec<(String, String, String, u32)>,
    fractions: Vec<(String, String, String, f64, u32)>,
    /// SDK calls given arguments after the parameters object: group, method, how many
    /// arguments, where the second starts, the call's range.
    positional: Vec<Found>,
    first_arguments: Vec<(u32, u32)>,
    /// Names bound, each with the range of what it is bound from.
    bindings: Vec<(String, (u32, u32))>,
    /// Names read, where.
    uses: Vec<(String, u32)>,
    /// Expressions only tested or compared.
    guards: Vec<(u32, u32)>,
    /// SDK calls written from `api` (or `api.request` with a literal method), with the
    /// range of their arguments.
    sdk_arguments: Vec<(super::flow::Called, (u32, u32))>,
    declared_types: std::collections::HashSet<String>,
    assigned_names: std::collections::HashSet<String>,
    member_assigned: std::collections::HashSet<String>,
    start: u32,
}

/// A raw request as the parser found it: method, path parts, where the path starts, and its
/// body's fields written out (key, literal value, where the key starts), parser positions.
type Located = (
    String,
    Vec<super::routes::Part>,
    u32,
    Vec<(String, Option<serde_json::Value>, u32)>,
);

/// The fields of the `body: { ... }` written out in a raw request's options (`api.request(m,
/// p, { body: { ... } })`): each key, its value when a literal, where the key starts.
fn body_fields(call: &CallExpr) -> Vec<(String, Option<serde_json::Value>, u32)> {
    let Some(Expr::Object(options)) = call.args.get(2).map(|a| &*a.expr) else {
        return Vec::new();
    };
    let body = options.props.iter().rev().find_map(|prop| match prop {
        PropOrSpread::Prop(prop) => match &**prop {
            Prop::KeyValue(pair) if prop_key(&pair.key).as_deref() == Some("body") => {
                Some(&*pair.value)
            }
            _ => None,
        },
        PropOrSpread::Spread(_) => None,
    });
    let Some(Expr::Object(body)) = body else {
        return Vec::new();
    };
    body.props
        .iter()
        .filter_map(|prop| match prop {
            PropOrSpread::Prop(prop) => match &**prop {
                Prop::KeyValue(pair) => Some((
                    prop_key(&pair.key)?,
                    json_literal(&pair.value),
                    pair.key.span().lo.0,
                )),
                Prop::Shorthand(name) => Some((name.sym.to_string(), None, name.span.lo.0)),
                _ => None,
            },
            PropOrSpread::Spread(_) => None,
        })
        .collect()
}

/// A literal string, number, boolean or `null` as JSON.
fn json_literal(expr: &Expr) -> Option<serde_json::Value> {
    use deno_ast::swc::ast::Lit;
    match expr {
        Expr::Lit(Lit::Str(text)) => Some(text.value.to_string_lossy().into_owned().into()),
        Expr::Lit(Lit::Num(number)) => serde_json::Number::from_f64(number.value).map(|n| {
            match number.value.fract() == 0.0 && number.value.abs() < 9e15 {
                true => serde_json::Value::from(number.value as i64),
                false => serde_json::Value::Number(n),
            }
        }),
        Expr::Lit(Lit::Bool(flag)) => Some(flag.value.into()),
        Expr::Lit(Lit::Null(_)) => Some(serde_json::Value::Null),
        Expr::Tpl(template) if template.exprs.is_empty() => Some(
            template
                .quasis
                .first()?
                .cooked
                .as_ref()?
                .to_string_lossy()
                .into_owned()
                .into(),
        ),
        _ => None,
    }
}

/// Whether `expr` is a member chain rooted at the identifier `api`.
fn rooted_at_api(expr: &Expr) -> bool {
    let mut expr = expr;
    // Followed for as many links as an SDK name has at most: a chain a thousand links long is
    // no SDK name, and each of its links is asked this.
    for _ in 0..MAX_LINKS {
        expr = match expr {
            Expr::Ident(ident) => return ident.sym.as_ref() == "api",
            Expr::Member(member) => &member.obj,
            Expr::Paren(paren) => &paren.expr,
            _ => return false,
        };
    }
    false
}

/// Array methods whose callback decides (a predicate, a comparator) rather than gives values.
const PREDICATES: &[&str] = &[
    "filter",
    "find",
    "findIndex",
    "findLast",
    "findLastIndex",
    "some",
    "every",
    "sort",
    "toSorted",
];

/// Links of a member chain followed at most: more than any SDK name has.
const MAX_LINKS: usize = 64;

/// Whether `expr` is a value written as it is: a string, number, boolean, null or a template
/// without substitutions.
fn is_literal(expr: &Expr) -> bool {
    match expr {
        Expr::Lit(_) => true,
        Expr::Tpl(template) => template.exprs.is_empty(),
        Expr::Unary(unary) => matches!(&*unary.arg, Expr::Lit(_)),
        _ => false,
    }
}

/// Whether the run-time SDK refuses a call with these arguments whatever their values: more
/// than the parameters object, none spread, one after it not `undefined`, and not what a
/// callback is handed, which it takes (an item and a number, `Array.from(rows,
/// api.customers.create)`, or an item, a number and an array, `list.map(...)`): a second
/// argument that may be a number, and a third that may be an array, are given the benefit.
fn refused_arguments(args: &[deno_ast::swc::ast::ExprOrSpread]) -> bool {
    use deno_ast::swc::ast::{Lit, UnaryOp};
    if args.len() < 2 || args.iter().any(|a| a.spread.is_some()) {
        return false;
    }
    let undefined = |e: &Expr| match e {
        Expr::Ident(i) => i.sym.as_ref() == "undefined",
        Expr::Unary(unary) => unary.op == UnaryOp::Void,
        _ => false,
    };
    if args[1..].iter().all(|a| undefined(&a.expr)) {
        return false;
    }
    // Values that cannot be a number, or an array.
    let not_number = |e: &Expr| {
        matches!(
            e,
            Expr::Object(_) | Expr::Array(_) | Expr::Tpl(_) | Expr::Arrow(_) | Expr::Fn(_)
        ) || matches!(e, Expr::Lit(lit) if !matches!(lit, Lit::Num(_)))
    };
    let not_array = |e: &Expr| {
        matches!(
            e,
            Expr::Object(_) | Expr::Tpl(_) | Expr::Lit(_) | Expr::Arrow(_) | Expr::Fn(_)
        )
    };
    match args {
        [_, second] => not_number(&second.expr),
        [_, second, third] => not_number(&second.expr) || not_array(&third.expr),
        _ => true,
    }
}

/// The literal values in an argument's object and array literals, each with its key.
fn literals(expr: &Expr, out: &mut Vec<(u32, u32)>) {
    match expr {
        Expr::Object(object) => {
            for prop in &object.props {
                if let PropOrSpread::Prop(prop) = prop
                    && let Prop::KeyValue(pair) = &**prop
                {
                    if is_literal(&pair.value) {
                        out.push((pair.key.span().lo.0, pair.value.span().hi.0));
                    } else {
                        literals(&pair.value, out);
                    }
                }
            }
        }
        Expr::Array(array) => {
            for element in array.elems.iter().flatten() {
                if is_literal(&element.expr) {
                    let span = element.expr.span();
                    out.push((span.lo.0, span.hi.0));
                } else {
                    literals(&element.expr, out);
                }
            }
        }
        _ => {}
    }
}

impl Spans {
    /// Notes `expr` as only tested or compared, not flowing on.
    fn guard(&mut self, expr: &Expr) {
        let span = expr.span();
        self.guards.push((span.lo.0, span.hi.0));
    }

    /// Notes the property `callee` calls, if it is one, and whether it is called on what an
    /// SDK call returned.
    fn note_called(&mut self, callee: &Expr) {
        let Some((prop, receiver)) = called_property(callee) else {
            return;
        };
        self.called.push((prop.lo.0, prop.hi.0));
        if self.is_response(receiver) {
            self.called_on_responses.push((prop.lo.0, prop.hi.0));
        }
    }

    /// Whether `expr` is what an SDK call returned, or a part of it: a variable holding one,
    /// the call itself (awaited or not), and members of either.
    fn is_response(&self, expr: &Expr) -> bool {
        match expr {
            Expr::Ident(ident) => self.responses.contains(ident.sym.as_ref()),
            Expr::Member(member) => self.is_response(&member.obj),
            Expr::OptChain(chain) => match &*chain.base {
                deno_ast::swc::ast::OptChainBase::Member(member) => self.is_response(&member.obj),
                deno_ast::swc::ast::OptChainBase::Call(_) => false,
            },
            Expr::Paren(paren) => self.is_response(&paren.expr),
            other => is_sdk_result(other),
        }
    }
}

/// Whether `expr` is an SDK call (`api.x.y(...)`), awaited or not.
fn is_sdk_result(expr: &Expr) -> bool {
    match expr {
        Expr::Await(awaited) => is_sdk_result(&awaited.arg),
        Expr::Paren(paren) => is_sdk_result(&paren.expr),
        Expr::Call(call) => matches!(&call.callee, Callee::Expr(callee) if rooted_at_api(callee)),
        _ => false,
    }
}

/// Where the name of the property a callee calls is (`filter` in `list.filter`, `list?.filter`,
/// `(list.filter)`), and what it is called on, if the callee is a property.
fn called_property(callee: &Expr) -> Option<(deno_ast::swc::common::Span, &Expr)> {
    match callee {
        Expr::Member(member) => Some((member.prop.span(), &member.obj)),
        Expr::Paren(paren) => called_property(&paren.expr),
        Expr::OptChain(chain) => match &*chain.base {
            deno_ast::swc::ast::OptChainBase::Member(member) => {
                Some((member.prop.span(), &member.obj))
            }
            deno_ast::swc::ast::OptChainBase::Call(_) => None,
        },
        _ => None,
    }
}

/// A property's name written as an identifier or a string.
fn prop_key(key: &deno_ast::swc::ast::PropName) -> Option<String> {
    match key {
        deno_ast::swc::ast::PropName::Ident(name) => Some(name.sym.to_string()),
        deno_ast::swc::ast::PropName::Str(text) => Some(text.value.to_string_lossy().into_owned()),
        _ => None,
    }
}

/// A number literal with a fraction (`19.99`, `-0.5`).
fn fraction(expr: &Expr) -> Option<f64> {
    use deno_ast::swc::ast::{Lit, UnaryOp};
    let value = match expr {
        Expr::Lit(Lit::Num(number)) => number.value,
        Expr::Unary(unary) if unary.op == UnaryOp::Minus => match &*unary.arg {
            Expr::Lit(Lit::Num(number)) => -number.value,
            _ => return None,
        },
        _ => return None,
    };
    (value.fract() != 0.0).then_some(value)
}

/// The text of a string literal or a template without substitutions.
fn literal_text(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Lit(deno_ast::swc::ast::Lit::Str(text)) => {
            Some(text.value.to_string_lossy().into_owned())
        }
        Expr::Tpl(template) if template.exprs.is_empty() => template
            .quasis
            .first()
            .and_then(|q| q.cooked.as_ref())
            .map(|c| c.to_string_lossy().into_owned()),
        _ => None,
    }
}

/// A path written as a string literal or a template (its substitutions any text), its query
/// cut off; `None` for anything else, or a path that may not be relative to the API's base.
fn path_parts(expr: &Expr, constant: Constant<'_>) -> Option<Vec<super::routes::Part>> {
    let cut = url_parts(expr, constant)?;
    // Only a path from the API's root: an absolute URL, or a path not starting at `/` from a
    // substitution, is not judged here.
    match cut.first() {
        Some(super::routes::Part::Text(first))
            if first.starts_with('/') && !first.starts_with("//") =>
        {
            Some(cut)
        }
        _ => None,
    }
}

/// A literal or template URL's parts, cut where a written query or fragment begins.
fn url_parts(expr: &Expr, constant: Constant<'_>) -> Option<Vec<super::routes::Part>> {
    use super::routes::Part;
    let mut parts = Vec::new();
    match expr {
        Expr::Tpl(template) => {
            for (n, quasi) in template.quasis.iter().enumerate() {
                let text = quasi.cooked.as_ref()?.to_string_lossy().into_owned();
                parts.push(Part::Text(text));
                if let Some(substituted) = template.exprs.get(n) {
                    let known = match &**substituted {
                        Expr::Ident(name) => constant(name),
                        _ => None,
                    };
                    parts.push(match (known, one_segment(substituted)) {
                        (Some(text), _) => Part::Text(text),
                        (None, true) => Part::One,
                        (None, false) => Part::Any,
                    });
                }
            }
        }
        other => parts.push(Part::Text(literal_text(other)?)),
    }
    // The path ends where a written query or fragment begins (a substitution could hold one
    // too: what follows it may be query).
    let mut cut = Vec::new();
    for part in parts {
        match part {
            Part::Text(text) => {
                let end = text.find(['?', '#']);
                cut.push(Part::Text(text[..end.unwrap_or(text.len())].to_owned()));
                if end.is_some() {
                    break;
                }
            }
            substituted => cut.push(substituted),
        }
    }
    // Texts side by side (a constant substituted between two) are one.
    let mut merged: Vec<Part> = Vec::with_capacity(cut.len());
    for part in cut {
        match (merged.last_mut(), part) {
            (Some(Part::Text(last)), Part::Text(text)) => last.push_str(&text),
            (_, part) => merged.push(part),
        }
    }
    Some(merged)
}

/// A `fetch(url, init)` call with a literal URL and method (`GET` when `init` names none): the
/// method, the URL's parts and where the URL starts (parser position). Not when `init` is not
/// an object written out, or may set its method otherwise (a spread, a computed method).
fn fetch_request(
    call: &CallExpr,
    constant: Constant<'_>,
) -> Option<(String, Vec<super::routes::Part>, u32)> {
    let Callee::Expr(callee) = &call.callee else {
        return None;
    };
    if !matches!(&**callee, Expr::Ident(name) if name.sym.as_ref() == "fetch") {
        return None;
    }
    let url = call.args.first()?;
    let method = match call.args.get(1).map(|init| &*init.expr) {
        None => "GET".to_owned(),
        Some(Expr::Object(init)) => {
            let mut method = Some("GET".to_owned());
            for prop in &init.props {
                match prop {
                    PropOrSpread::Spread(_) => return None,
                    PropOrSpread::Prop(prop) => match &**prop {
                        Prop::KeyValue(pair)
                            if prop_key(&pair.key).as_deref() == Some("method") =>
                        {
                            method = literal_text(&pair.value);
                        }
                        Prop::Shorthand(name) if name.sym.as_ref() == "method" => method = None,
                        _ => {}
                    },
                }
            }
            method?
        }
        Some(_) => return None,
    };
    Some((
        method.to_ascii_uppercase(),
        url_parts(&url.expr, constant)?,
        url.expr.span().lo.0,
    ))
}

/// Whether a template's substitution surely holds one path segment, no slash: a value made
/// for a segment (`encodeURIComponent(...)`), a number, or a name for an id (`zone_id`,
/// `customerId`, `pr.number`). Anything else may hold several (`${repo.full_name}`).
fn one_segment(expr: &Expr) -> bool {
    let name = match expr {
        Expr::Paren(paren) => return one_segment(&paren.expr),
        Expr::Lit(deno_ast::swc::ast::Lit::Num(_)) => return true,
        Expr::Call(call) => {
            return matches!(&call.callee, Callee::Expr(callee)
                if matches!(&**callee, Expr::Ident(f) if f.sym.as_ref() == "encodeURIComponent"));
        }
        Expr::Ident(ident) => ident.sym.to_string(),
        Expr::Member(member) => match &member.prop {
            MemberProp::Ident(name) => name.sym.to_string(),
            _ => return false,
        },
        _ => return false,
    };
    name == "id"
        || name == "number"
        || name.ends_with("_id")
        || name.ends_with("Id")
        || name.ends_with("ID")
        || name.ends_with("_number")
        || name.ends_with("Number")
}

/// Whether a raw request's options (its arguments after the path) surely leave the response
/// as the spec declares it: none, or an object written out without `headers` or a spread.
fn plain_options(rest: &[deno_ast::swc::ast::ExprOrSpread]) -> bool {
    match rest {
        [] => true,
        [options] => match &*options.expr {
            Expr::Object(object) => object.props.iter().all(|prop| match prop {
                PropOrSpread::Spread(_) => false,
                PropOrSpread::Prop(prop) => match &**prop {
                    Prop::KeyValue(pair) => prop_key(&pair.key).is_some_and(|k| k != "headers"),
                    Prop::Shorthand(name) => name.sym.as_ref() != "headers",
                    _ => false,
                },
            }),
            _ => false,
        },
        _ => false,
    }
}

/// The text of a name bound once to a literal string (`const BASE = "https://..."`), which a
/// template written with it (`${BASE}/zones`) holds; `None` for any other.
type Constant<'a> = &'a dyn Fn(&deno_ast::swc::ast::Ident) -> Option<String>;

/// An `api.request` call with a literal method and path: the method (upper case), the path's
/// parts, and where the path starts (parser position).
fn raw_request(
    call: &CallExpr,
    constant: Constant<'_>,
) -> Option<(String, Vec<super::routes::Part>, u32)> {
    let Callee::Expr(callee) = &call.callee else {
        return None;
    };
    let Expr::Member(member) = &**callee else {
        return None;
    };
    let [method, path, ..] = &call.args[..] else {
        return None;
    };
    if dotted(member).as_deref() != Some("api.request") {
        return None;
    }
    let method = literal_text(&method.expr)?.to_ascii_uppercase();
    Some((
        method,
        path_parts(&path.expr, constant)?,
        path.expr.span().lo.0,
    ))
}

/// `api.orders.retrieve` for a chain of plain names, else `None`.
fn dotted(member: &MemberExpr) -> Option<String> {
    let mut parts = Vec::new();
    let mut member = member;
    for _ in 0..MAX_LINKS {
        match &member.prop {
            MemberProp::Ident(name) => parts.push(name.sym.as_ref()),
            _ => return None,
        }
        match &*member.obj {
            Expr::Ident(ident) => {
                parts.push(ident.sym.as_ref());
                parts.reverse();
                return Some(parts.join("."));
            }
            Expr::Member(inner) => member = inner,
            _ => return None,
        }
    }
    None
}

impl Spans {
    /// The SDK name a member chain is (`api.issues.create`), its root `api` or a name bound
    /// to the SDK or one of its groups (`const { issues } = api`, `const stripe = api`, a
    /// helper's parameter typed as the SDK); `None` for anything else.
    fn sdk_path(&self, expr: &Expr) -> Option<String> {
        let mut parts: Vec<&str> = Vec::new();
        let mut expr = expr;
        for _ in 0..MAX_LINKS {
            match expr {
                Expr::Member(member) => {
                    let MemberProp::Ident(name) = &member.prop else {
                        return None;
                    };
                    parts.push(name.sym.as_ref());
                    expr = &member.obj;
                }
                Expr::Paren(paren) => expr = &paren.expr,
                Expr::Ident(root) => {
                    let bound = super::flow::resolved(root);
                    let root = match root.sym.as_ref() {
                        "api" if !self.not_sdk.contains(&bound) => "api".to_owned(),
                        _ => self.sdk_aliases.get(&bound)?.clone(),
                    };
                    parts.reverse();
                    return Some(
                        std::iter::once(root.as_str())
                            .chain(parts)
                            .collect::<Vec<_>>()
                            .join("."),
                    );
                }
                _ => return None,
            }
        }
        None
    }

    /// Notes a parameter typed as the SDK (`client: SdkboxApi`, as the check types those
    /// every call hands `api`) as a name for it.
    fn note_typed_api(&mut self, pat: &Pat) {
        use deno_ast::swc::ast::{TsEntityName, TsType};
        let Pat::Ident(binding) = pat else {
            return;
        };
        let Some(annotation) = &binding.type_ann else {
            return;
        };
        let sdk = matches!(&*annotation.type_ann, TsType::TsTypeRef(reference)
            if matches!(&reference.type_name, TsEntityName::Ident(name) if name.sym.as_ref() == "SdkboxApi"));
        if sdk {
            self.sdk_aliases
                .insert(super::flow::resolved(&binding.id), "api".to_owned());
        } else if binding.id.sym.as_ref() == "api" {
            // A parameter named `api` typed as something else is not the SDK.
            self.not_sdk.insert(super::flow::resolved(&binding.id));
        }
    }

    /// Whether `expr` computes a number that may have a fraction: a product with a fraction
    /// (`amount * 0.15`, `price * rate` where `rate = 1.2`), a quotient (`total / count`), or
    /// a sum with either; not what `Math.round` and the like made whole.
    fn computes_fraction(&self, expr: &Expr) -> bool {
        use deno_ast::swc::ast::BinaryOp;
        let fractional = |side: &Expr| match side {
            Expr::Ident(name) => self.fractional.contains(&super::flow::resolved(name)),
            Expr::Paren(paren) => {
                self.computes_fraction(&paren.expr) || fraction(&paren.expr).is_some()
            }
            other => fraction(other).is_some() || self.computes_fraction(other),
        };
        match expr {
            Expr::Paren(paren) => self.computes_fraction(&paren.expr),
            Expr::Ident(name) => self.fractional.contains(&super::flow::resolved(name)),
            Expr::Bin(binary) => match binary.op {
                BinaryOp::Mul | BinaryOp::Add | BinaryOp::Sub => {
                    fractional(&binary.left) || fractional(&binary.right)
                }
                BinaryOp::Div => true,
                _ => false,
            },
            _ => false,
        }
    }
}

impl Visit for Spans {
    fn visit_param(&mut self, param: &deno_ast::swc::ast::Param) {
        self.note_typed_api(&param.pat);
        param.visit_children_with(self);
    }

    fn visit_arrow_expr(&mut self, arrow: &deno_ast::swc::ast::ArrowExpr) {
        for pat in &arrow.params {
            self.note_typed_api(pat);
        }
        arrow.visit_children_with(self);
    }

    fn visit_var_decl(&mut self, decl: &deno_ast::swc::ast::VarDecl) {
        // What a `const` holds is what it was bound to: a literal string, or a number
        // computed with a fraction (a `let` may be made whole later).
        if decl.kind == deno_ast::swc::ast::VarDeclKind::Const {
            for declarator in &decl.decls {
                let (Pat::Ident(name), Some(init)) = (&declarator.name, declarator.init.as_deref())
                else {
                    continue;
                };
                if let Some(text) = literal_text(init) {
                    self.constants.insert(super::flow::resolved(&name.id), text);
                }
                if self.computes_fraction(init) || fraction(init).is_some() {
                    self.fractional.insert(super::flow::resolved(&name.id));
                }
            }
        }
        decl.visit_children_with(self);
    }

    fn visit_ts_interface_decl(&mut self, decl: &deno_ast::swc::ast::TsInterfaceDecl) {
        self.declared_types.insert(decl.id.sym.to_string());
        decl.visit_children_with(self);
    }

    fn visit_ts_type_alias_decl(&mut self, decl: &deno_ast::swc::ast::TsTypeAliasDecl) {
        self.declared_types.insert(decl.id.sym.to_string());
        decl.visit_children_with(self);
    }

    fn visit_ts_enum_decl(&mut self, decl: &deno_ast::swc::ast::TsEnumDecl) {
        self.declared_types.insert(decl.id.sym.to_string());
        decl.visit_children_with(self);
    }

    fn visit_class_decl(&mut self, decl: &deno_ast::swc::ast::ClassDecl) {
        self.declared_types.insert(decl.ident.sym.to_string());
        decl.visit_children_with(self);
    }

    fn visit_ts_type_param(&mut self, param: &deno_ast::swc::ast::TsTypeParam) {
        self.declared_types.insert(param.name.sym.to_string());
        param.visit_children_with(self);
    }

    fn visit_assign_expr(&mut self, assign: &deno_ast::swc::ast::AssignExpr) {
        use deno_ast::swc::ast::{AssignTarget, SimpleAssignTarget};
        if let AssignTarget::Simple(SimpleAssignTarget::Ident(name)) = &assign.left {
            let from = assign.right.span();
            self.bindings
                .push((super::flow::resolved(&name.id), (from.lo.0, from.hi.0)));
        }
        if let AssignTarget::Simple(SimpleAssignTarget::Member(member)) = &assign.left
            && let MemberProp::Ident(name) = &member.prop
        {
            self.assigned_names.insert(name.sym.to_string());
            self.member_assigned.insert(name.sym.to_string());
        }
        assign.visit_children_with(self);
    }

    fn visit_prop(&mut self, prop: &Prop) {
        use deno_ast::swc::ast::PropName;
        let key = match prop {
            Prop::KeyValue(pair) => Some(&pair.key),
            Prop::Method(method) => Some(&method.key),
            Prop::Getter(getter) => Some(&getter.key),
            Prop::Setter(setter) => Some(&setter.key),
            Prop::Shorthand(name) => {
                self.assigned_names.insert(name.sym.to_string());
                // `{ sha }` reads the variable `sha`.
                self.uses
                    .push((super::flow::resolved(name), name.span.lo.0));
                None
            }
            Prop::Assign(_) => None,
        };
        match key {
            Some(PropName::Ident(name)) => {
                self.assigned_names.insert(name.sym.to_string());
            }
            Some(PropName::Str(text)) => {
                self.assigned_names
                    .insert(text.value.to_string_lossy().into_owned());
            }
            _ => {}
        }
        prop.visit_children_with(self);
    }

    fn visit_opt_call(&mut self, call: &deno_ast::swc::ast::OptCall) {
        self.note_called(&call.callee);
        call.visit_children_with(self);
    }

    fn visit_expr(&mut self, expr: &Expr) {
        use deno_ast::swc::ast::{BinaryOp, UnaryOp};
        match expr {
            Expr::Ident(name) => {
                self.uses
                    .push((super::flow::resolved(name), name.span.lo.0));
            }
            // What is only tested, compared or given a fallback decides, it does not flow:
            // `o.trial ? "a" : "b"`, `c.email_address ?? c.email`, `x === y`, `!x`, `typeof x`.
            Expr::Cond(cond) => self.guard(&cond.test),
            Expr::Bin(binary) => match binary.op {
                BinaryOp::NullishCoalescing | BinaryOp::LogicalOr | BinaryOp::LogicalAnd => {
                    self.guard(&binary.left)
                }
                BinaryOp::EqEq
                | BinaryOp::NotEq
                | BinaryOp::EqEqEq
                | BinaryOp::NotEqEq
                | BinaryOp::Lt
                | BinaryOp::LtEq
                | BinaryOp::Gt
                | BinaryOp::GtEq
                | BinaryOp::In
                | BinaryOp::InstanceOf => {
                    self.guard(&binary.left);
                    self.guard(&binary.right);
                }
                _ => {}
            },
            Expr::Unary(unary) if matches!(unary.op, UnaryOp::Bang | UnaryOp::TypeOf) => {
                self.guard(&unary.arg)
            }
            _ => {}
        }
        expr.visit_children_with(self);
    }

    fn visit_stmt(&mut self, stmt: &deno_ast::swc::ast::Stmt) {
        use deno_ast::swc::ast::Stmt;
        // What a statement only tests: its condition, or what it switches on.
        match stmt {
            Stmt::If(s) => self.guard(&s.test),
            Stmt::While(s) => self.guard(&s.test),
            Stmt::DoWhile(s) => self.guard(&s.test),
            Stmt::Switch(s) => self.guard(&s.discriminant),
            _ => {}
        }
        stmt.visit_children_with(self);
    }

    fn visit_for_of_stmt(&mut self, stmt: &deno_ast::swc::ast::ForOfStmt) {
        use deno_ast::swc::ast::ForHead;
        let from = stmt.right.span();
        let mut names = Vec::new();
        match &stmt.left {
            ForHead::VarDecl(decl) => {
                for declarator in &decl.decls {
                    super::flow::bound_names(&declarator.name, &mut names);
                }
            }
            ForHead::Pat(pat) => super::flow::bound_names(pat, &mut names),
            ForHead::UsingDecl(_) => {}
        }
        self.bindings
            .extend(names.into_iter().map(|name| (name, (from.lo.0, from.hi.0))));
        stmt.visit_children_with(self);
    }

    fn visit_var_declarator(&mut self, declarator: &deno_ast::swc::ast::VarDeclarator) {
        use deno_ast::swc::ast::ObjectPatProp;
        // A name for the SDK or one of its groups: `const stripe = api`, `const g =
        // api.customers`, `const { refunds, customers: c } = api`.
        if let Some(path) = declarator
            .init
            .as_deref()
            .and_then(|init| self.sdk_path(init))
        {
            match &declarator.name {
                Pat::Ident(name) => {
                    self.sdk_aliases
                        .insert(super::flow::resolved(&name.id), path);
                }
                Pat::Object(object) => {
                    for prop in &object.props {
                        let (key, bound) = match prop {
                            ObjectPatProp::Assign(assign) => {
                                (assign.key.sym.to_string(), &assign.key.id)
                            }
                            ObjectPatProp::KeyValue(pair) => {
                                match (prop_key(&pair.key), &*pair.value) {
                                    (Some(key), Pat::Ident(name)) => (key, &name.id),
                                    _ => continue,
                                }
                            }
                            ObjectPatProp::Rest(_) => continue,
                        };
                        self.sdk_aliases
                            .insert(super::flow::resolved(bound), format!("{path}.{key}"));
                    }
                }
                _ => {}
            }
        }
        // A function's value is the function: what its body reads does not flow into it.
        if let Some(init) = declarator
            .init
            .as_deref()
            .filter(|init| !matches!(init, Expr::Arrow(_) | Expr::Fn(_) | Expr::Class(_)))
        {
            let from = init.span();
            let mut names = Vec::new();
            super::flow::bound_names(&declarator.name, &mut names);
            self.bindings
                .extend(names.into_iter().map(|name| (name, (from.lo.0, from.hi.0))));
        }
        if declarator.init.as_deref().is_some_and(is_sdk_result) {
            match &declarator.name {
                Pat::Ident(name) => {
                    self.responses.insert(name.id.sym.to_string());
                }
                Pat::Object(object) => {
                    for prop in &object.props {
                        match prop {
                            ObjectPatProp::Assign(assign) => {
                                self.responses.insert(assign.key.sym.to_string());
                            }
                            ObjectPatProp::KeyValue(pair) => {
                                if let Pat::Ident(name) = &*pair.value {
                                    self.responses.insert(name.id.sym.to_string());
                                }
                            }
                            ObjectPatProp::Rest(_) => {}
                        }
                    }
                }
                _ => {}
            }
        }
        declarator.visit_children_with(self);
    }

    fn visit_member_expr(&mut self, member: &MemberExpr) {
        if rooted_at_api(&member.obj) {
            self.names
                .push((member.span.lo.0, member.span.hi.0, dotted(member)));
        }
        if matches!(member.prop, MemberProp::Computed(_)) && self.is_response(&member.obj) {
            self.indexed_responses
                .push((member.span.lo.0, member.span.hi.0));
        }
        member.visit_children_with(self);
    }

    fn visit_call_expr(&mut self, call: &CallExpr) {
        if let Callee::Expr(callee) = &call.callee {
            self.note_called(callee);
        }
        // A predicate's or a comparator's body decides which items, it does not flow into
        // them: `subs.filter((s) => s.cancel_at_period_endd)`.
        if let Callee::Expr(callee) = &call.callee
            && let Expr::Member(member) = &**callee
            && let MemberProp::Ident(name) = &member.prop
            && PREDICATES.contains(&name.sym.as_ref())
        {
            for argument in &call.args {
                if matches!(&*argument.expr, Expr::Arrow(_) | Expr::Fn(_)) {
                    self.guard(&argument.expr);
                }
            }
        }
        if let Callee::Expr(callee) = &call.callee
            && let Some(name) = self.sdk_path(callee)
            && let (Some(first), Some(last)) = (call.args.first(), call.args.last())
        {
            let called = match name.strip_prefix("api.").and_then(|n| n.rsplit_once('.')) {
                Some((group, method)) => Some(super::flow::Called::Sdk {
                    group: group.to_owned(),
                    method: method.to_owned(),
                }),
                None if name == "api.request" => {
                    literal_text(&first.expr).map(|method| super::flow::Called::Raw {
                        method: method.to_ascii_uppercase(),
                    })
                }
                None => None,
            };
            if let Some(called) = called {
                let range = (first.expr.span().lo.0, last.expr.span().hi.0);
                self.sdk_arguments.push((called, range));
            }
        }
        let constants = std::mem::take(&mut self.constants);
        let constant =
            |name: &deno_ast::swc::ast::Ident| constants.get(&super::flow::resolved(name)).cloned();
        let raw = raw_request(call, &constant);
        let fetched = fetch_request(call, &constant);
        self.constants = constants;
        if let Some((method, parts, path)) = raw {
            self.raw_requests
                .push((method, parts, path, body_fields(call)));
        }
        if let Some((method, parts, url)) = fetched {
            if let (Some(first), Some(last)) = (call.args.first(), call.args.last()) {
                let range = (first.expr.span().lo.0, last.expr.span().hi.0);
                let called = super::flow::Called::Raw {
                    method: method.clone(),
                };
                self.sdk_arguments.push((called, range));
            }
            self.fetches.push((method, parts, url, Vec::new()));
        }
        if let Callee::Expr(callee) = &call.callee
            && let Some(name) = self.sdk_path(callee)
            && let Some((path, method)) = name.strip_prefix("api.").and_then(|n| n.rsplit_once('.'))
            && let Some(argument) = call.args.first()
            && let Expr::Object(object) = &*argument.expr
        {
            // A key's value is the last one written for it, a spread after it may replace
            // it, and a `body` wrapper may too: only a literal nothing after it can replace
            // is what is sent.
            let keys: Vec<Option<String>> = object
                .props
                .iter()
                .map(|prop| match prop {
                    PropOrSpread::Prop(prop) => match &**prop {
                        Prop::KeyValue(pair) => prop_key(&pair.key),
                        Prop::Shorthand(name) => Some(name.sym.to_string()),
                        _ => None,
                    },
                    PropOrSpread::Spread(_) => None,
                })
                .collect();
            let wrapped = keys.iter().any(|k| k.as_deref() == Some("body"));
            for (n, prop) in object.props.iter().enumerate() {
                let replaced = |key: &str| {
                    object.props[n + 1..]
                        .iter()
                        .zip(&keys[n + 1..])
                        .any(|(later, k)| {
                            matches!(later, PropOrSpread::Spread(_)) || k.as_deref() == Some(key)
                        })
                };
                // A number computed with a fraction, written here or bound to a name first.
                if let PropOrSpread::Prop(prop) = prop
                    && !wrapped
                {
                    let computed = match &**prop {
                        Prop::KeyValue(pair) if self.computes_fraction(&pair.value) => {
                            prop_key(&pair.key).map(|key| (key, pair.value.span().lo.0))
                        }
                        Prop::Shorthand(name)
                            if self.fractional.contains(&super::flow::resolved(name)) =>
                        {
                            Some((name.sym.to_string(), name.span.lo.0))
                        }
                        _ => None,
                    };
                    if let Some((key, at)) = computed
                        && !replaced(&key)
                    {
                        self.computed_fractions
                            .push((path.to_owned(), method.to_owned(), key, at));
                    }
                }
                if let PropOrSpread::Prop(prop) = prop
                    && let Prop::KeyValue(pair) = &**prop
                    && let Some(key) = prop_key(&pair.key)
                    && !wrapped
                    && !replaced(&key)
                    && let Some(value) = fraction(&pair.value)
                {
                    self.fractions.push((
                        path.to_owned(),
                        method.to_owned(),
                        key,
                        value,
                        pair.value.span().lo.0,
                    ));
                }
            }
        }
        if let Callee::Expr(callee) = &call.callee
            && let Some(name) = self.sdk_path(callee)
            && let Some((path, method)) = name.strip_prefix("api.").and_then(|n| n.rsplit_once('.'))
            && refused_arguments(&call.args)
        {
            self.positional.push(Found {
                group: path.to_owned(),
                method: method.to_owned(),
                arguments: call.args.len(),
                second: call.args[1].expr.span().lo.0,
                call: (call.span.lo.0, call.span.hi.0),
            });
        }
        if let Callee::Expr(callee) = &call.callee
            && self.sdk_path(callee).is_some()
        {
            self.calls.push((call.span.lo.0, call.span.hi.0));
            if let Some(first) = call.args.first().filter(|a| a.spread.is_none()) {
                let span = first.expr.span();
                self.first_arguments.push((span.lo.0, span.hi.0));
            }
            for argument in &call.args {
                match &*argument.expr {
                    Expr::Object(object) => {
                        self.literal_arguments
                            .push((object.span.lo.0, object.span.hi.0));
                    }
                    expr if is_literal(expr) => {
                        let span = expr.span();
                        self.literal_values.push((span.lo.0, span.hi.0));
                    }
                    _ => {}
                }
                literals(&argument.expr, &mut self.literal_values);
            }
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
        let code = "/// <reference path=\"/etc/passwd\" />\nimport {\n  api\n} from \"sdkbox\"; // the SDK\nimport x from '/etc/shadow';\nreturn `\nimport os\nprint(1)`;";
        let document = Document::new(code);
        assert!(!document.text.contains("/etc/"), "{}", document.text);
        assert!(
            document.text.contains("import os\nprint(1)"),
            "{}",
            document.text
        );
        assert_eq!(document.text.lines().count(), code.lines().count() + 3);
    }

    #[test]
    fn an_untyped_api_parameter_is_the_sdk() {
        let code = "export default async function main(api) { return api.customers.lst(); }";
        let document = Document::new(code);
        assert!(
            document.text.contains("main(api: SdkboxApi)"),
            "{}",
            document.text
        );
        let line = document.offset;
        let typed = document.text.lines().nth(line as usize).unwrap();
        let at = typed.find("lst").unwrap() as u32;
        assert_eq!(
            document.model_character(line, at),
            code.find("lst").unwrap() as u32
        );
        assert!(
            Document::new("const f = async (api: any) => 1; return f;")
                .inserted
                .is_empty()
        );
    }

    #[test]
    fn module_code_is_checked_as_written() {
        let document =
            Document::new("export default async function main() { return api.orders.list(); }");
        assert_eq!(document.offset, 1);
        assert!(document.text.ends_with("export {};\n"));
    }
}
