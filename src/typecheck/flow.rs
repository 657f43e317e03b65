//! Where a doubtful value goes within a script: whether what the checker doubts (a field the
//! response does not declare, a list object read as an array) reaches the arguments of a
//! write, where it would be sent as `undefined` or worse, instead of only a read or the
//! returned value.
//!
//! A value flows into a write when the doubtful expression is written in the write's
//! arguments (a path id, a body field, a template), or in what a name is bound from (`const`,
//! `let`, an assignment, `for ... of`) and that name, or a name bound from it in turn, is read
//! in the write's arguments. Names are the parser's resolved bindings, so a callback's
//! parameter is not the variable it shadows. What is only tested, compared or given a
//! fallback decides and does not flow (the innermost of a test and a write's arguments wins:
//! a write inside a test still receives what is written in it).

use deno_ast::swc::ast::{ObjectPatProp, Pat};

/// A call whose arguments a value may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Called {
    /// `api.<group>.<method>(...)`.
    Sdk {
        /// The group, dotted (`dns.records`).
        group: String,
        /// The method.
        method: String,
    },
    /// `api.request("POST", ...)` with a literal method.
    Raw {
        /// The method, upper case.
        method: String,
    },
}

/// What the code's values flow through, by byte ranges of the checked text. Names are the
/// parser's resolved bindings (`x#2`), so a callback's parameter is not the variable it
/// shadows.
#[derive(Debug, Default)]
pub struct Flow {
    /// Each name bound, and the range of what it is bound from.
    pub bindings: Vec<(String, (usize, usize))>,
    /// Each name read, and where.
    pub uses: Vec<(String, usize)>,
    /// SDK calls and raw requests, with the range of their arguments.
    pub calls: Vec<(Called, (usize, usize))>,
    /// Expressions only tested, compared or given a fallback: what is read there decides, it
    /// does not flow on.
    pub guards: Vec<(usize, usize)>,
}

/// Names bound, names read and tests a script may have for its flows to be followed; beyond
/// any, or past [`MAX_STEPS`], nothing is followed but what is written in a write's arguments,
/// rather than make one check's work grow with the script.
const MAX_BINDINGS: usize = 2_000;
const MAX_USES: usize = 20_000;
const MAX_GUARDS: usize = 20_000;
/// Reads looked at while following, all names together.
const MAX_STEPS: usize = 200_000;

/// What the innermost range around a position is: a write's arguments, or a test.
#[derive(Clone, Copy)]
enum Inner<'a> {
    Write(&'a Called),
    Guard,
}

/// The text cut into pieces, each labelled with the innermost range that holds it (ranges
/// are the parser's spans: nested or apart), to ask in logarithmic time.
struct Innermost<'a> {
    starts: Vec<usize>,
    labels: Vec<Option<Inner<'a>>>,
}

impl<'a> Innermost<'a> {
    fn new(mut ranges: Vec<((usize, usize), Inner<'a>)>) -> Self {
        // Outer before inner: by start, then the longer first.
        ranges.sort_by_key(|((lo, hi), _)| (*lo, std::cmp::Reverse(*hi)));
        let mut starts = vec![0];
        let mut labels = vec![None];
        let mut open: Vec<((usize, usize), Inner<'a>)> = Vec::new();
        let mut mark = |at: usize, label: Option<Inner<'a>>| {
            if starts.last() == Some(&at) {
                labels.pop();
                starts.pop();
            }
            starts.push(at);
            labels.push(label);
        };
        for (range, inner) in ranges {
            // Close what ends before this one starts, each giving way to what held it.
            while let Some(&((_, hi), _)) = open.last() {
                if hi > range.0 {
                    break;
                }
                open.pop();
                mark(hi, open.last().map(|(_, inner)| *inner));
            }
            open.push((range, inner));
            mark(range.0, Some(inner));
        }
        while let Some(((_, hi), _)) = open.pop() {
            mark(hi, open.last().map(|(_, inner)| *inner));
        }
        Self { starts, labels }
    }

    fn at(&self, at: usize) -> Option<Inner<'a>> {
        let index = self.starts.partition_point(|start| *start <= at);
        self.labels[index.saturating_sub(1)]
    }
}

/// Where values reach writes in one script, worked out once: the writes' arguments, the
/// ranges names are bound from when the name, or one bound from it in turn, is read in a
/// write's arguments, and the tests that stop a flow.
pub struct Reach<'a> {
    innermost: Innermost<'a>,
    sources: Vec<(&'a Called, (usize, usize))>,
}

impl Reach<'_> {
    /// Whether what is written at byte `at` is only tested or compared (the innermost range
    /// around it is a test, not a write's arguments).
    pub fn tests(&self, at: usize) -> bool {
        matches!(self.innermost.at(at), Some(Inner::Guard))
    }

    /// The write a value written at byte `at` reaches, directly or through names; none for a
    /// value only tested or compared.
    pub fn from(&self, at: usize) -> Option<&Called> {
        match self.innermost.at(at) {
            Some(Inner::Write(called)) => Some(called),
            Some(Inner::Guard) => None,
            None => self
                .sources
                .iter()
                .find(|(_, range)| inside(at, *range))
                .map(|(called, _)| *called),
        }
    }
}

fn inside(at: usize, (lo, hi): (usize, usize)) -> bool {
    (lo..hi).contains(&at)
}

impl Flow {
    /// Where values reach the calls `is_write` accepts.
    pub fn reach(&self, is_write: impl Fn(&Called) -> bool) -> Reach<'_> {
        let writes: Vec<((usize, usize), Inner<'_>)> = self
            .calls
            .iter()
            .filter(|(called, _)| is_write(called))
            .map(|(called, range)| (*range, Inner::Write(called)))
            .collect();
        let any_write = !writes.is_empty();
        let guards = self
            .guards
            .iter()
            .take(MAX_GUARDS)
            .map(|r| (*r, Inner::Guard));
        let mut reach = Reach {
            innermost: Innermost::new(writes.into_iter().chain(guards).collect()),
            sources: Vec::new(),
        };
        if !any_write
            || self.bindings.len() > MAX_BINDINGS
            || self.uses.len() > MAX_USES
            || self.guards.len() > MAX_GUARDS
        {
            return reach;
        }
        // Reads that carry their value (not tested), in order, to find those within a range
        // by bisection; names' bindings by name.
        let mut reads: Vec<(usize, &str)> = self
            .uses
            .iter()
            .filter(|(_, at)| !matches!(reach.innermost.at(*at), Some(Inner::Guard)))
            .map(|(name, at)| (*at, name.as_str()))
            .collect();
        reads.sort_unstable();
        let within = |(lo, hi): (usize, usize)| {
            let first = reads.partition_point(|(at, _)| *at < lo);
            reads[first..].iter().take_while(move |(at, _)| *at < hi)
        };
        let mut bound: std::collections::HashMap<&str, Vec<(usize, usize)>> = Default::default();
        for (name, from) in &self.bindings {
            bound.entry(name.as_str()).or_default().push(*from);
        }
        // Names read in a write's arguments reach it; so do names read in what a reaching
        // name is bound from, and so on, each name looked at once.
        let mut reaching: std::collections::HashMap<&str, &Called> = Default::default();
        let mut queue: Vec<&str> = Vec::new();
        let mut steps = 0usize;
        for (at, name) in &reads {
            if let Some(Inner::Write(called)) = reach.innermost.at(*at)
                && !reaching.contains_key(name)
            {
                reaching.insert(name, called);
                queue.push(name);
            }
        }
        while let Some(name) = queue.pop() {
            let called = reaching[name];
            for from in bound.get(name).into_iter().flatten() {
                reach.sources.push((called, *from));
                for (_, read) in within(*from) {
                    steps += 1;
                    if steps > MAX_STEPS {
                        reach.sources.clear();
                        return reach;
                    }
                    if !reaching.contains_key(read) {
                        reaching.insert(read, called);
                        queue.push(read);
                    }
                }
            }
        }
        reach
    }
}

/// A name as the parser resolved it: its spelling and its binding's context.
pub fn resolved(ident: &deno_ast::swc::ast::Ident) -> String {
    format!("{}#{}", ident.sym, ident.ctxt.as_u32())
}

/// The names a binding pattern binds (`x`, `{ a, b: c }`, `[d, ...e]`, `f = 1`).
pub fn bound_names(pat: &Pat, out: &mut Vec<String>) {
    match pat {
        Pat::Ident(name) => out.push(resolved(&name.id)),
        Pat::Array(array) => {
            for element in array.elems.iter().flatten() {
                bound_names(element, out);
            }
        }
        Pat::Object(object) => {
            for prop in &object.props {
                match prop {
                    ObjectPatProp::KeyValue(pair) => bound_names(&pair.value, out),
                    ObjectPatProp::Assign(assign) => out.push(resolved(&assign.key.id)),
                    ObjectPatProp::Rest(rest) => bound_names(&rest.arg, out),
                }
            }
        }
        Pat::Rest(rest) => bound_names(&rest.arg, out),
        Pat::Assign(assign) => bound_names(&assign.left, out),
        Pat::Invalid(_) | Pat::Expr(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow_of(code: &str) -> (crate::typecheck::document::Document, Flow) {
        let mut document = crate::typecheck::document::Document::new(code);
        let flow = std::mem::take(&mut document.flow);
        (document, flow)
    }

    fn reached(code: &str, needle: &str) -> Option<String> {
        let (document, flow) = flow_of(code);
        let at = document.text.find(needle).expect("needle");
        let write = |called: &Called| match called {
            Called::Sdk { method, .. } => method != "get" && method != "list",
            Called::Raw { method } => method != "GET",
        };
        flow.reach(write)
            .from(at)
            .map(|called| format!("{called:?}"))
    }

    #[test]
    fn a_value_reaches_a_write_written_in_it_or_through_names_bound_from_it() {
        let direct = "const o = await api.orders.get({ order_id: \"o\" });\n\
                      await api.customers.update({ customer_id: o.customer_idd });";
        assert!(reached(direct, "customer_idd").is_some_and(|c| c.contains("update")));
        let through = "const o = await api.orders.get({ order_id: \"o\" });\n\
                       const id = o.customer_idd;\nconst { x, ...rest } = { x: id };\n\
                       for (const y of [rest]) await api.customers.update({ customer_id: y, x });";
        assert!(reached(through, "customer_idd").is_some());
        let shorthand = "const o = await api.pulls.get({});\nconst sha = o.head_shaa;\n\
                         await api.repos.createCommitStatus({ sha });";
        assert!(reached(shorthand, "head_shaa").is_some());
        let raw = "const o = await api.pulls.get({});\n\
                   await api.request(\"POST\", `/x/${o.head_shaa}`);";
        assert!(reached(raw, "head_shaa").is_some_and(|c| c.contains("POST")));
    }

    #[test]
    fn a_shadowing_parameter_a_tested_value_and_a_function_body_do_not_carry_it() {
        let shadowed = "const o = await api.orders.get({});\nconst c = o.customer_emaill;\n\
                        console.log(c);\nconst list = await api.customers.list({});\n\
                        await Promise.all(list.data.map((c) => api.customers.update({ customer_id: c.id })));";
        assert_eq!(reached(shadowed, "customer_emaill"), None);
        let tested = "const o = await api.orders.get({});\n\
                      const email = o.email_addresss ?? \"x\";\nconst kind = o.trial ? \"a\" : \"b\";\n\
                      await api.customers.update({ customer_id: \"c\", email, kind });";
        assert_eq!(reached(tested, "email_addresss"), None);
        assert_eq!(reached(tested, "trial"), None);
        let helper = "const o = await api.orders.get({});\n\
                      const name = async () => { console.log(o.customer_idd); return \"x\"; };\n\
                      await api.customers.update({ customer_id: await name() });";
        assert_eq!(reached(helper, "customer_idd"), None);
    }

    #[test]
    fn the_innermost_of_tests_and_writes_decides() {
        let called = Called::Raw {
            method: "POST".into(),
        };
        let innermost = Innermost::new(vec![
            ((60, 70), Inner::Guard),
            ((0, 100), Inner::Write(&called)),
            ((10, 50), Inner::Guard),
            ((20, 30), Inner::Write(&called)),
            ((20, 25), Inner::Guard),
        ]);
        let label = |at| match innermost.at(at) {
            Some(Inner::Write(_)) => "write",
            Some(Inner::Guard) => "test",
            None => "none",
        };
        let labels: Vec<&str> = [5, 15, 22, 27, 40, 55, 65, 99, 100].map(label).to_vec();
        assert_eq!(
            labels,
            [
                "write", "test", "test", "write", "test", "write", "test", "write", "none"
            ]
        );
    }

    #[test]
    fn a_script_of_too_many_names_has_its_flows_left_unfollowed() {
        let chain: String = (1..=MAX_BINDINGS + 1)
            .map(|n| format!("const a{n} = a{};\n", n - 1))
            .collect();
        let code = format!(
            "const o = await api.orders.get({{}});\nconst a0 = o.customer_idd;\n{chain}\
             await api.customers.update({{ customer_id: a{} }});",
            MAX_BINDINGS + 1
        );
        assert_eq!(reached(&code, "customer_idd"), None);
        let short = "const o = await api.orders.get({});\nconst a0 = o.customer_idd;\n\
                     const a1 = a0;\nawait api.customers.update({ customer_id: a1 });";
        assert!(reached(short, "customer_idd").is_some());
    }

    #[test]
    fn a_value_that_reaches_only_reads_or_the_result_does_not() {
        let read = "const o = await api.orders.get({ order_id: \"o\" });\n\
                    const id = o.customer_idd;\nconst c = await api.customers.get({ customer_id: id });\n\
                    await api.customers.update({ customer_id: \"cus_1\" });\nreturn { id, c };";
        assert_eq!(reached(read, "customer_idd"), None);
    }
}
