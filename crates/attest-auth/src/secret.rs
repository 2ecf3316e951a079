//! API key material. A key is `attest_<id>_<secret>`: `id` is 12 hex digits (public: logs, `attest key list`
//! and `attest key revoke` name it), `secret` 64 hex digits of a 32-byte random value. Meta stores only the
//! sha256 of the whole key; the key itself is shown once, when it is minted.

use attest_core::keys::{key_id_problem, KEY_ID_HEX};
use rand::RngCore;
use sha2::{Digest, Sha256};

const PREFIX: &str = "attest_";
const SECRET_BYTES: usize = 32;

/// A freshly minted key: its id, the key (shown once) and the hash meta keeps.
pub struct MintedKey {
    pub id: String,
    pub key: String,
    pub sha256_hex: String,
}

/// `bytes` from the operating system's random source, as hex.
fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rngs::OsRng.fill_bytes(&mut buf);
    hex::encode(buf)
}

/// A 32-byte random secret as 64 hex digits (a process's own cluster key, say).
pub fn random_token() -> String {
    random_hex(SECRET_BYTES)
}

/// Mints a key from the operating system's random source.
pub fn mint() -> MintedKey {
    let id = random_hex(KEY_ID_HEX / 2);
    let key = format!("{PREFIX}{id}_{}", random_token());
    let sha256_hex = hex::encode(digest(&key));
    MintedKey {
        id,
        key,
        sha256_hex,
    }
}

/// sha256 of a presented key (what is compared against meta's hashes).
pub fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// The id part of a well-formed key, else `None`.
pub fn key_id(key: &str) -> Option<&str> {
    let rest = key.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let secret_ok =
        secret.len() == SECRET_BYTES * 2 && secret.bytes().all(|b| b.is_ascii_hexdigit());
    (key_id_problem(id).is_none() && secret_ok).then_some(id)
}

/// The bearer token of an `Authorization` value (`Bearer <token>`, the scheme in any case).
pub fn bearer(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_keys_parse_and_hash_to_what_is_stored() {
        let a = mint();
        let b = mint();
        assert_ne!(a.key, b.key);
        assert_eq!(key_id(&a.key), Some(a.id.as_str()));
        assert_eq!(hex::encode(digest(&a.key)), a.sha256_hex);
        assert_eq!(a.sha256_hex.len(), 64);
    }

    #[test]
    fn malformed_keys_have_no_id() {
        let k = mint().key;
        assert_eq!(key_id(&k[..k.len() - 1]), None);
        assert_eq!(key_id(&k.replace("attest_", "other_")), None);
        assert_eq!(key_id("attest_0123456789ab_zz"), None);
        assert_eq!(key_id(""), None);
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("abc"), None);
    }
}
