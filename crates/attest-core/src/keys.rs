//! The shape of an API key's grant (SPEC "Security"): its scopes, the tenants and collections it may act on,
//! and how its public id is spelt. One rule, used by meta when it stores a key and by the router when it
//! mints one, so a key meta accepts is a key every node can read.

use crate::limits::collection_name_problem;

/// What a key may do. Ordered: a key holding a scope may do everything a lower one allows (`admin` ⊇ `write` ⊇
/// `read`), so a write key can also search and ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Read,
    Write,
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Read, Scope::Write, Scope::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// The tenant entry that stands for every tenant.
pub const ANY_TENANT: &str = "*";
/// Longest tenant name.
pub const MAX_TENANT: usize = 128;
/// Most tenants or collections one key may list.
pub const MAX_GRANT_ENTRIES: usize = 256;
/// A key id is this many lowercase hex digits (6 random bytes): enough to name a key in logs, never enough to
/// use it.
pub const KEY_ID_HEX: usize = 12;

/// Why a tenant name is refused: 1–128 characters of `[A-Za-z0-9_.-]`.
pub fn tenant_problem(tenant: &str) -> Option<String> {
    let ok = !tenant.is_empty()
        && tenant.len() <= MAX_TENANT
        && tenant
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    (!ok).then(|| format!("use 1-{MAX_TENANT} characters from [A-Za-z0-9_.-]"))
}

/// Why a key id is refused.
pub fn key_id_problem(id: &str) -> Option<String> {
    let ok = id.len() == KEY_ID_HEX
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (!ok).then(|| format!("must be {KEY_ID_HEX} lowercase hex digits"))
}

/// The first thing wrong with a grant, as (field, problem): scopes known and at least one; tenants at least one,
/// each a tenant name or `*`; collections (empty = all) valid names.
pub fn grant_problem(
    scopes: &[String],
    tenants: &[String],
    collections: &[String],
) -> Option<(&'static str, String)> {
    if scopes.is_empty() {
        return Some(("scopes", "name at least one of read, write, admin".into()));
    }
    if let Some(s) = scopes.iter().find(|s| Scope::parse(s).is_none()) {
        return Some((
            "scopes",
            format!("unknown scope {s:?} (read, write or admin)"),
        ));
    }
    if tenants.is_empty() {
        return Some((
            "tenants",
            "name at least one tenant (or \"*\" for all)".into(),
        ));
    }
    if tenants.len() > MAX_GRANT_ENTRIES || collections.len() > MAX_GRANT_ENTRIES {
        return Some((
            "tenants",
            format!("at most {MAX_GRANT_ENTRIES} tenants and collections"),
        ));
    }
    for t in tenants.iter().filter(|t| *t != ANY_TENANT) {
        if let Some(p) = tenant_problem(t) {
            return Some(("tenants", format!("{t:?}: {p}")));
        }
    }
    for c in collections {
        if let Some(p) = collection_name_problem(c) {
            return Some(("collections", format!("{c:?}: {p}")));
        }
    }
    None
}

/// Parses a duration such as `30d`, `12h`, `90m` or `3600s` into milliseconds (a key's `expires_in`).
/// Digits and a unit only (no sign, no space): the form the OpenAPI document states
/// (`attest_core::contract::KEY_LIFETIME_PATTERN`).
pub fn parse_duration_ms(text: &str) -> Option<u64> {
    let unit = text.chars().last()?;
    let digits = &text[..text.len() - unit.len_utf8()];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let ms = match unit {
        's' => 1_000,
        'm' => 60_000,
        'h' => 3_600_000,
        'd' => 86_400_000,
        _ => return None,
    };
    n.checked_mul(ms).filter(|&v| v > 0)
}

/// The longest a key may be minted for: ten years (3,650 days). A longer `expires_in` is a mistake, not a wish
/// for a key that never expires (leave it out for that); 10^15 s overflowed nothing but meant nothing either.
pub const MAX_KEY_LIFETIME_MS: u64 = 3_650 * 86_400_000;

/// A key's `expires_in` in milliseconds, or why it is refused (not a duration, or longer than
/// [`MAX_KEY_LIFETIME_MS`]).
pub fn key_lifetime_ms(text: &str) -> Result<u64, String> {
    let ms = parse_duration_ms(text)
        .ok_or_else(|| "a duration such as 30d, 12h, 90m or 3600s".to_string())?;
    if ms > MAX_KEY_LIFETIME_MS {
        return Err(format!(
            "at most {}d (leave it out for a key that never expires)",
            MAX_KEY_LIFETIME_MS / 86_400_000
        ));
    }
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_lives_at_most_ten_years() {
        assert_eq!(key_lifetime_ms("3650d"), Ok(MAX_KEY_LIFETIME_MS));
        assert!(key_lifetime_ms("3651d").unwrap_err().contains("3650d"));
        assert!(key_lifetime_ms("1000000000000000s").is_err());
        assert!(key_lifetime_ms("soon").is_err());
        assert_eq!(key_lifetime_ms("90m"), Ok(5_400_000));
    }

    fn v(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn scopes_are_ordered_and_parsed_by_name() {
        assert!(Scope::Admin > Scope::Write && Scope::Write > Scope::Read);
        for s in Scope::ALL {
            assert_eq!(Scope::parse(s.as_str()), Some(s));
        }
        assert_eq!(Scope::parse("root"), None);
    }

    #[test]
    fn grants_name_the_field_at_fault() {
        assert_eq!(grant_problem(&v(&["read"]), &v(&["acme"]), &[]), None);
        assert_eq!(
            grant_problem(&v(&["write"]), &v(&["*"]), &v(&["docs"])),
            None
        );
        assert_eq!(grant_problem(&[], &v(&["acme"]), &[]).unwrap().0, "scopes");
        assert_eq!(
            grant_problem(&v(&["root"]), &v(&["acme"]), &[]).unwrap().0,
            "scopes"
        );
        assert_eq!(grant_problem(&v(&["read"]), &[], &[]).unwrap().0, "tenants");
        assert_eq!(
            grant_problem(&v(&["read"]), &v(&["a b"]), &[]).unwrap().0,
            "tenants"
        );
        assert_eq!(
            grant_problem(&v(&["read"]), &v(&["a"]), &v(&["no/slash"]))
                .unwrap()
                .0,
            "collections"
        );
    }

    #[test]
    fn key_ids_and_durations() {
        assert_eq!(key_id_problem("0123456789ab"), None);
        assert!(key_id_problem("0123456789AB").is_some());
        assert!(key_id_problem("0123").is_some());
        assert_eq!(parse_duration_ms("30d"), Some(30 * 86_400_000));
        assert_eq!(parse_duration_ms("2s"), Some(2_000));
        assert_eq!(parse_duration_ms("0h"), None);
        assert_eq!(parse_duration_ms("5y"), None);
        assert_eq!(parse_duration_ms(""), None);
    }
}
