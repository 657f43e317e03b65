//! Group renames from the provider file (`[names]`): where a provider's official SDK groups
//! its resources in a way its spec does not say (Cloudflare's `zeroTrust.access` for
//! `/access/...`), the operator names the group as models know it.

use std::collections::{BTreeMap, HashMap};

use crate::spec::model::Operation;

/// Renames every group that is `from` or nested in it (`"access" = "zeroTrust.access"` makes
/// `access.policies` `zeroTrust.access.policies`); the longest `from` that fits wins. An
/// error says which rename names no group, names an invalid group, or makes two operations
/// share a name.
pub fn rename_groups(
    operations: &mut [Operation],
    renames: &BTreeMap<String, String>,
) -> Result<(), String> {
    for (from, to) in renames {
        let valid = |name: &str| {
            !name.is_empty()
                && name.split('.').all(|part| {
                    part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                        && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
        };
        if !valid(to) {
            return Err(format!(
                "names: `{from}` = \"{to}\": a group is identifiers with dots between them, like \"zeroTrust.access\""
            ));
        }
        // The names `api` and its nodes keep for themselves could not be called.
        let reserved = to.split('.').enumerate().find(|(i, part)| {
            super::RESERVED_METHODS.contains(part)
                || (*i == 0 && super::RESERVED_GROUPS.contains(part))
        });
        if let Some((_, part)) = reserved {
            return Err(format!(
                "names: `{from}` = \"{to}\": `{part}` is a name scripts cannot call there (`api` keeps it); choose another"
            ));
        }
        if !operations
            .iter()
            .any(|op| within(&op.group, from).is_some())
        {
            let mut groups: Vec<&str> = operations.iter().map(|op| op.group.as_str()).collect();
            groups.sort_unstable();
            groups.dedup();
            return Err(format!(
                "names: no group `{from}`{} Groups are the SDK's own names, as search shows them",
                crate::sdk::did_you_mean(from, &groups)
            ));
        }
    }
    for op in operations.iter_mut() {
        let longest = renames
            .iter()
            .filter_map(|(from, to)| within(&op.group, from).map(|rest| (from.len(), to, rest)))
            .max_by_key(|(len, _, _)| *len);
        if let Some((_, to, rest)) = longest {
            op.group = format!("{to}{rest}");
        }
    }
    let mut seen: HashMap<(&str, &str), &str> = HashMap::new();
    for op in operations.iter() {
        if let Some(other) = seen.insert((&op.group, &op.name), &op.id) {
            return Err(format!(
                "names: after renaming, `{}` and `{}` would both be api.{}.{}; rename one group apart",
                other, op.id, op.group, op.name
            ));
        }
    }
    Ok(())
}

/// What follows `from` in `group` when `group` is `from` or nested in it (`""` or `.x`).
fn within<'a>(group: &'a str, from: &str) -> Option<&'a str> {
    let rest = group.strip_prefix(from)?;
    (rest.is_empty() || rest.starts_with('.')).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(id: &str, group: &str, name: &str) -> Operation {
        crate::testing::operation(id, "GET", &format!("/{id}"), group, name)
    }

    fn renames(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn renames_a_group_and_those_nested_in_it_the_longest_first() {
        let mut ops = vec![
            op("a", "access", "list"),
            op("b", "access.policies", "get"),
            op("c", "accessories", "list"),
            op("d", "dnsRecords", "list"),
        ];
        let map = renames(&[
            ("access", "zeroTrust.access"),
            ("access.policies", "zeroTrust.policies"),
            ("dnsRecords", "dns.records"),
        ]);
        rename_groups(&mut ops, &map).unwrap();
        let names: Vec<String> = ops
            .iter()
            .map(|o| format!("{}.{}", o.group, o.name))
            .collect();
        assert_eq!(
            names,
            [
                "zeroTrust.access.list",
                "zeroTrust.policies.get",
                "accessories.list",
                "dns.records.list"
            ]
        );
    }

    #[test]
    fn a_rename_that_names_nothing_is_invalid_or_collides_is_an_error() {
        let ops = || vec![op("a", "access", "list"), op("b", "gateway", "list")];
        let error = rename_groups(&mut ops(), &renames(&[("acess", "x")])).unwrap_err();
        assert!(
            error.contains("no group `acess`; did you mean `access`?"),
            "{error}"
        );
        let error = rename_groups(&mut ops(), &renames(&[("access", "zero trust")])).unwrap_err();
        assert!(
            error.contains("identifiers with dots between them"),
            "{error}"
        );
        for reserved in ["then", "paginate", "x.call", "x.toJSON"] {
            let error = rename_groups(&mut ops(), &renames(&[("access", reserved)])).unwrap_err();
            assert!(
                error.contains("scripts cannot call there"),
                "{reserved}: {error}"
            );
        }
        let error = rename_groups(&mut ops(), &renames(&[("access", "gateway")])).unwrap_err();
        assert!(error.contains("would both be api.gateway.list"), "{error}");
    }
}
