//! Where a doubtful value goes within a script: whether what the checker doubts (a field the
//! response does not declare, a list object read as an array) reaches the arguments of a
//! write, where it would be sent as `undefined` or worse, instead of only a read or the
//! returned value.
//!
//! A value flows into a write when the doubtful expression is written in the write's
//! arguments (a path id, a body field, a template), or in what a name is bound from (`const`,
//! `let`, an assignment, `for ... of`) and that name, or a name bound from it in turn, is read
//! in the write's arguments. Names are followed by spelling, not by scope: a name bound in one
//! function and read in another of the same spelling is taken for the same value, which can
//! only make the check stricter about a write.

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

/// What the code's values flow through, by byte ranges of the checked text.
#[derive(Debug, Default)]
pub struct Flow {
    /// Each name bound, and the range of what it is bound from.
    pub bindings: Vec<(String, (usize, usize))>,
    /// Each name read, and where.
    pub uses: Vec<(String, usize)>,
    /// SDK calls and raw requests, with the range of their arguments.
    pub calls: Vec<(Called, (usize, usize))>,
}

/// Names a script may bind in all, at most: beyond, flows are not followed (the check stays
/// a warning) rather than make one check's work grow with the script.
const MAX_FOLLOWED: usize = 2_000;

impl Flow {
    /// The first call among those `is_write` accepts that the value written at byte `at`
    /// reaches, directly or through names bound from it.
    pub fn reaches(&self, at: usize, is_write: impl Fn(&Called) -> bool) -> Option<&Called> {
        let writes: Vec<&(Called, (usize, usize))> = self
            .calls
            .iter()
            .filter(|(called, _)| is_write(called))
            .collect();
        let inside = |at: usize, (lo, hi): (usize, usize)| (lo..hi).contains(&at);
        if let Some((called, _)) = writes.iter().find(|(_, range)| inside(at, *range)) {
            return Some(called);
        }
        if self.bindings.len() > MAX_FOLLOWED {
            return None;
        }
        // The names the value is bound to, then those bound from them, until none is new.
        let mut tainted: Vec<&str> = self
            .bindings
            .iter()
            .filter(|(_, from)| inside(at, *from))
            .map(|(name, _)| name.as_str())
            .collect();
        let mut next = 0;
        while next < tainted.len() {
            let name = tainted[next];
            next += 1;
            let reads = self.uses.iter().filter(|(used, _)| used == name);
            for (_, read) in reads {
                if let Some((called, _)) = writes.iter().find(|(_, range)| inside(*read, *range)) {
                    return Some(called);
                }
                for (bound, _) in self
                    .bindings
                    .iter()
                    .filter(|(_, from)| inside(*read, *from))
                {
                    if !tainted.contains(&bound.as_str()) {
                        tainted.push(bound);
                    }
                }
            }
        }
        None
    }
}

/// The names a binding pattern binds (`x`, `{ a, b: c }`, `[d, ...e]`, `f = 1`).
pub fn bound_names(pat: &Pat, out: &mut Vec<String>) {
    match pat {
        Pat::Ident(name) => out.push(name.id.sym.to_string()),
        Pat::Array(array) => {
            for element in array.elems.iter().flatten() {
                bound_names(element, out);
            }
        }
        Pat::Object(object) => {
            for prop in &object.props {
                match prop {
                    ObjectPatProp::KeyValue(pair) => bound_names(&pair.value, out),
                    ObjectPatProp::Assign(assign) => out.push(assign.key.sym.to_string()),
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
        flow.reaches(at, write).map(|called| format!("{called:?}"))
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
    fn a_value_that_reaches_only_reads_or_the_result_does_not() {
        let read = "const o = await api.orders.get({ order_id: \"o\" });\n\
                    const id = o.customer_idd;\nconst c = await api.customers.get({ customer_id: id });\n\
                    await api.customers.update({ customer_id: \"cus_1\" });\nreturn { id, c };";
        assert_eq!(reached(read, "customer_idd"), None);
    }
}
