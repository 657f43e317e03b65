//! Renames from the provider file (`[names]`): where a provider's official SDK groups or
//! names its resources in a way its spec does not say (Cloudflare's `zeroTrust.access` for
//! `/access/...`, `intel.dns.list` for `GET /intel/dns`), the operator names them as models
//! know them.

use std::collections::{BTreeMap, HashMap};

use crate::spec::model::Operation;

/// Applies the `[names]` table. A key that is a group renames it and every group nested in
/// it (`"access" = "zeroTrust.access"` makes `access.policies` `zeroTrust.access.policies`;
/// the longest key that fits wins); a key that is no group but one operation's
/// `group.method` renames that operation alone (`"intel.dns" = "intel.dns.list"`), before
/// any group rename would. Keys are the spec's own names, never renamed ones. An error says
/// which key names nothing, which name is invalid, or which two operations would share a
/// name.
pub fn apply_names(
    operations: &mut [Operation],
    renames: &BTreeMap<String, String>,
) -> Result<(), String> {
    let mut single: HashMap<&str, &str> = HashMap::new();
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
        if operations
            .iter()
            .any(|op| within(&op.group, from).is_some())
        {
            continue;
        }
        let operation = operations.iter().any(|op| {
            from.strip_prefix(op.group.as_str())
                .and_then(|r| r.strip_prefix('.'))
                == Some(op.name.as_str())
        });
        match (operation, to.contains('.')) {
            (true, true) => {
                single.insert(from, to);
            }
            (true, false) => {
                return Err(format!(
                    "names: `{from}` = \"{to}\": an operation is renamed to a group and a method, like \"intel.dns.list\""
                ));
            }
            (false, _) => {
                let mut groups: Vec<&str> = operations.iter().map(|op| op.group.as_str()).collect();
                groups.sort_unstable();
                groups.dedup();
                return Err(format!(
                    "names: no group or operation `{from}`{} Groups and operations are the SDK's own names, as search shows them without the file",
                    crate::sdk::did_you_mean(from, &groups)
                ));
            }
        }
    }
    for op in operations.iter_mut() {
        let spec_name = format!("{}.{}", op.group, op.name);
        let group_renamed = renames
            .iter()
            .filter_map(|(from, to)| within(&op.group, from).map(|rest| (from.len(), to, rest)))
            .max_by_key(|(len, _, _)| *len)
            .map(|(_, to, rest)| format!("{to}{rest}"));
        if let Some(group) = &group_renamed {
            op.former.push(spec_name.clone());
            op.group = group.clone();
        }
        // An operation renamed alone keeps what its group's rename alone would make of it
        // too: a script written for a file without the operation's line still runs.
        if let Some(to) = single.get(spec_name.as_str())
            && let Some((group, name)) = to.rsplit_once('.')
        {
            op.former.push(spec_name);
            op.former.push(format!("{}.{}", op.group, op.name));
            op.group = group.to_owned();
            op.name = name.to_owned();
        }
        op.former.dedup();
    }
    let mut seen: HashMap<(&str, &str), &str> = HashMap::new();
    for op in operations.iter() {
        if let Some(other) = seen.insert((&op.group, &op.name), &op.id) {
            return Err(format!(
                "names: after renaming, `{}` and `{}` would both be api.{}.{}; rename one of them apart",
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

    /// `group.method` of each of `ops` after `map` is applied.
    fn renamed(ops: &mut [Operation], map: &BTreeMap<String, String>) -> Vec<String> {
        apply_names(ops, map).unwrap();
        ops.iter()
            .map(|o| format!("{}.{}", o.group, o.name))
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
        assert_eq!(
            renamed(&mut ops, &map),
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
        let error = apply_names(&mut ops(), &renames(&[("acess", "x")])).unwrap_err();
        assert!(
            error.contains("no group or operation `acess`; did you mean `access`?"),
            "{error}"
        );
        let error = apply_names(&mut ops(), &renames(&[("access", "zero trust")])).unwrap_err();
        assert!(
            error.contains("identifiers with dots between them"),
            "{error}"
        );
        for reserved in ["then", "paginate", "x.call", "x.toJSON"] {
            let error = apply_names(&mut ops(), &renames(&[("access", reserved)])).unwrap_err();
            assert!(
                error.contains("scripts cannot call there"),
                "{reserved}: {error}"
            );
        }
        let error = apply_names(&mut ops(), &renames(&[("access", "gateway")])).unwrap_err();
        assert!(error.contains("would both be api.gateway.list"), "{error}");
    }

    #[test]
    fn a_key_naming_one_operation_renames_it_alone_before_its_group_is_renamed() {
        let mut ops = vec![
            op("a", "intel", "dns"),
            op("b", "intel", "whois"),
            op("c", "access.keys", "rotate"),
            op("d", "access.keys", "get"),
        ];
        let map = renames(&[
            ("intel.dns", "intel.dns.list"),
            ("access", "zeroTrust.access"),
            ("access.keys.rotate", "zeroTrust.access.keys.rotateKeys"),
        ]);
        assert_eq!(
            renamed(&mut ops, &map),
            [
                "intel.dns.list",
                "intel.whois",
                "zeroTrust.access.keys.rotateKeys",
                "zeroTrust.access.keys.get"
            ]
        );
        // Its former names: the spec's, and what its group's rename alone made of it.
        assert_eq!(
            ops[2].former,
            ["access.keys.rotate", "zeroTrust.access.keys.rotate"]
        );
        assert!(ops[1].former.is_empty());
        let error = apply_names(&mut ops, &renames(&[("intel.whois", "whois")])).unwrap_err();
        assert!(error.contains("to a group and a method"), "{error}");
        let mut ops = vec![op("a", "intel", "dns"), op("b", "intel", "whois")];
        let error = apply_names(&mut ops, &renames(&[("intel.dns", "intel.whois")])).unwrap_err();
        assert!(error.contains("would both be api.intel.whois"), "{error}");
    }
}
