//! The rules of [`crate::limits`] and [`crate::keys`] as JSON Schema, for the OpenAPI document: what a field a
//! rule checks may hold (lengths, ranges, patterns, enums), built from the same constants the rule uses, so that
//! the contract states every limit the API enforces and cannot drift from it. The patterns are the character
//! sets of the name rules; the tests below hold each pattern to its rule on sample names.
//!
//! Each function returns a schema for `#[schema(schema_with = …)]` on a wire type's field, or for a parameter.

use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, SchemaType, Type};
use utoipa::openapi::{Object, RefOr, Schema};

use crate::keys::{Scope, ANY_TENANT, KEY_ID_HEX, MAX_GRANT_ENTRIES, MAX_TENANT};
use crate::limits::{
    MAX_COLLECTION_NAME, MAX_DIMENSION, MAX_EMBEDDER_MODEL, MAX_NBITS, MAX_NLIST, MAX_REPLICATION,
    MAX_SHARDS, MAX_SNAPSHOT_ID, MIN_RECALL_TARGET,
};
use crate::settings::MAX_DATA_HASH_LEN;

/// The characters of a collection name ([`crate::limits::collection_name_problem`]).
pub const COLLECTION_NAME_PATTERN: &str = "^[A-Za-z0-9_-]+$";
/// The characters of a tenant name ([`crate::keys::tenant_problem`]).
pub const TENANT_PATTERN: &str = "^[A-Za-z0-9_.-]+$";
/// A tenant a request may leave empty (for the default).
const OPTIONAL_TENANT_PATTERN: &str = "^[A-Za-z0-9_.-]*$";
/// A key's lifetime ([`crate::keys::parse_duration_ms`]): a positive whole number and a unit, or empty (never
/// expires, as when it is left out).
pub const KEY_LIFETIME_PATTERN: &str = "^([0-9]*[1-9][0-9]*[smhd])?$";
/// A text that is not blank: some character other than whitespace and control characters (a text the API
/// trims or normalises to nothing is refused as empty).
pub const NOT_BLANK_PATTERN: &str = r"[^ \t\n\r\f\v\u0000-\u001F\u007F-\u009F]";
/// The characters of a snapshot job's id ([`crate::limits::job_id_problem`]).
pub const JOB_ID_PATTERN: &str = "^[A-Za-z0-9._-]+$";
/// The characters of an embedding model's id ([`crate::limits::embedder_model_problem`]).
pub const EMBEDDER_MODEL_PATTERN: &str = "^[A-Za-z0-9._:/-]+$";
/// The characters of a snapshot id ([`crate::limits::snapshot_id_problem`]): not starting with `.`.
pub const SNAPSHOT_ID_PATTERN: &str = "^[A-Za-z0-9_-][A-Za-z0-9._-]*$";

fn string(min: usize, max: usize, pattern: impl Into<String>) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(min))
        .max_length(Some(max))
        .pattern(Some(pattern))
}

/// A collection name: 1–128 characters of `[A-Za-z0-9_-]`.
pub fn collection_name() -> Object {
    string(1, MAX_COLLECTION_NAME, COLLECTION_NAME_PATTERN)
        .description(Some(format!(
            "1-{MAX_COLLECTION_NAME} characters from [A-Za-z0-9_-]."
        )))
        .build()
}

/// A tenant name: 1–128 characters of `[A-Za-z0-9_.-]`.
pub fn tenant() -> Object {
    string(1, MAX_TENANT, TENANT_PATTERN)
        .description(Some(format!(
            "1-{MAX_TENANT} characters from [A-Za-z0-9_.-]."
        )))
        .build()
}

/// A tenant a request acts for, when it names one: absent, null or empty, the key's only tenant, else the
/// default tenant ([`crate::keys::tenant_problem`] for the rest).
pub fn optional_tenant() -> Object {
    nullable(
        string(0, MAX_TENANT, OPTIONAL_TENANT_PATTERN)
            .description(Some(format!(
                "Default (absent or empty): the key's only tenant, else the default tenant. At most \
                 {MAX_TENANT} characters from [A-Za-z0-9_.-]."
            )))
            .build(),
    )
}

/// A key id: its lowercase hex digits.
pub fn key_id() -> Object {
    string(
        KEY_ID_HEX,
        KEY_ID_HEX,
        format!("^[0-9a-f]{{{KEY_ID_HEX}}}$"),
    )
    .build()
}

/// A snapshot id: 1–128 characters of `[A-Za-z0-9._-]`, not starting with `.`.
pub fn snapshot_id() -> Object {
    string(1, MAX_SNAPSHOT_ID, SNAPSHOT_ID_PATTERN)
        .description(Some(format!(
            "1-{MAX_SNAPSHOT_ID} characters from [A-Za-z0-9._-], not starting with `.`; not `blobs`."
        )))
        .build()
}

/// A snapshot job's id: 1–128 characters of `[A-Za-z0-9._-]`.
pub fn job_id() -> Object {
    string(1, MAX_SNAPSHOT_ID, JOB_ID_PATTERN).build()
}

/// The embedding model a new collection is filled by (null: the router's configured embedder).
pub fn embedder_model() -> Object {
    nullable(named_embedder_model())
}

/// An embedding model named where one must be (a re-embedding's).
pub fn named_embedder_model() -> Object {
    string(1, MAX_EMBEDDER_MODEL, EMBEDDER_MODEL_PATTERN).build()
}

/// The same schema, `null` allowed too (a field that may be left out or sent as null).
fn nullable(schema: Object) -> Object {
    let mut schema = schema;
    let mut types = match schema.schema_type {
        SchemaType::Type(t) => vec![t],
        SchemaType::Array(ts) => ts,
        SchemaType::AnyValue => return schema,
    };
    types.push(Type::Null);
    schema.schema_type = SchemaType::from_iter(types);
    schema
}

/// An integer in `min..=max`.
fn integer(min: u64, max: u64) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(min as f64))
        .maximum(Some(max as f64))
}

/// A count a request may leave out (null: the default) but not set to 0.
fn optional_count(max: u64, description: &str) -> Object {
    nullable(
        integer(1, max)
            .description(Some(description.to_string()))
            .build(),
    )
}

/// `shards` of a new collection.
pub fn shards() -> Object {
    optional_count(
        MAX_SHARDS.into(),
        "Shards (default: the router's `default_shards`).",
    )
}

/// `replication` of a new collection.
pub fn replication() -> Object {
    optional_count(
        MAX_REPLICATION.into(),
        "Replicas per shard (default: the router's `default_replication`).",
    )
}

/// `index.nlist`.
pub fn nlist() -> Object {
    optional_count(MAX_NLIST.into(), "IVF lists.")
}

/// `index.m`: must also divide the collection's dimension.
pub fn pq_m() -> Object {
    optional_count(
        MAX_DIMENSION.into(),
        "PQ sub-quantisers; must divide the collection's dimension.",
    )
}

/// `index.nbits`.
pub fn nbits() -> Object {
    optional_count(MAX_NBITS.into(), "Bits per PQ code.")
}

/// `nprobe` of an index or a search: at most the index's `nlist`.
pub fn nprobe() -> Object {
    optional_count(
        MAX_NLIST.into(),
        "IVF lists probed per search; at most the index's `nlist`.",
    )
}

/// `recall_target` of an index ([`crate::limits::recall_target_problem`]).
pub fn recall_target() -> Object {
    nullable(
        ObjectBuilder::new()
            .schema_type(Type::Number)
            .minimum(Some(MIN_RECALL_TARGET))
            .maximum(Some(1.0))
            .description(Some(
                "Recall@10 each shard tunes its search setting to reach (searches that name no nprobe). \
                 Default 0.95 when the index names no nprobe; left out with an nprobe named, that nprobe serves."
                    .to_string(),
            ))
            .build(),
    )
}

/// A ratio in 0..1 ([`crate::config_check::in_unit_interval`]).
pub fn unit_interval() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Number)
        .minimum(Some(0.0))
        .maximum(Some(1.0))
        .build()
}

/// `data_hash` of collection thresholds.
pub fn data_hash() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .max_length(Some(MAX_DATA_HASH_LEN))
        .build()
}

/// `scopes` of a key's grant: at least one of `read`, `write`, `admin`.
pub fn scopes() -> RefOr<Schema> {
    let scope = ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(Scope::ALL.iter().map(|s| s.as_str())))
        .build();
    ArrayBuilder::new()
        .items(scope)
        .min_items(Some(1))
        .description(Some(
            "`read`, `write`, `admin` (a higher scope includes the lower ones).",
        ))
        .into()
}

/// `tenants` of a key's grant: 1–256 tenant names, or `*` for every tenant.
pub fn grant_tenants() -> RefOr<Schema> {
    let tenant = string(1, MAX_TENANT, format!(r"^(\{ANY_TENANT}|[A-Za-z0-9_.-]+)$")).build();
    ArrayBuilder::new()
        .items(tenant)
        .min_items(Some(1))
        .max_items(Some(MAX_GRANT_ENTRIES))
        .description(Some(format!(
            "Tenants the key may act for, or `{ANY_TENANT}` (at most {MAX_GRANT_ENTRIES})."
        )))
        .into()
}

/// `collections` of a key's grant: at most 256 collection names (empty: all).
pub fn grant_collections() -> RefOr<Schema> {
    ArrayBuilder::new()
        .items(collection_name())
        .max_items(Some(MAX_GRANT_ENTRIES))
        .description(Some(format!(
            "Collections the key may act on (empty or absent: all; at most {MAX_GRANT_ENTRIES})."
        )))
        .into()
}

/// `expires_in` of a key: `30d`, `12h`, `90m`, `3600s`, at most ten years.
pub fn key_lifetime() -> Object {
    nullable(
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(KEY_LIFETIME_PATTERN))
            .description(Some(format!(
                "`30d`, `12h`, `90m`, `3600s`; at most {}d; absent or empty: never expires.",
                crate::keys::MAX_KEY_LIFETIME_MS / 86_400_000
            )))
            .build(),
    )
}

#[cfg(test)]
mod tests {
    use regex::Regex;

    use super::*;
    use crate::keys::{key_id_problem, parse_duration_ms, tenant_problem};
    use crate::limits::{
        collection_name_problem, embedder_model_problem, job_id_problem, snapshot_id_problem,
    };

    /// Names a rule is tried on: each of the printable ASCII characters and a few beyond, alone and inside
    /// otherwise good names, at the edges of the length limits.
    fn samples() -> Vec<String> {
        let mut names = vec![String::new(), "blobs".into(), ".hidden".into()];
        for c in (' '..='~').chain(['é', '\n', '\t', '\u{0}']) {
            names.push(c.to_string());
            names.push(format!("a{c}b"));
            names.push(format!("{c}abc"));
            names.push(format!("12{c}d"));
            names.push(format!("{c}12d"));
        }
        for n in [1, 12, 127, 128, 129, 300] {
            names.push("a".repeat(n));
            names.push("0".repeat(n));
        }
        names
    }

    /// Whether `schema` (a string schema) admits `value` by its pattern and lengths.
    fn admits(schema: &Object, value: &str) -> bool {
        let chars = value.chars().count();
        let json = serde_json::to_value(schema).unwrap();
        let pattern = Regex::new(json["pattern"].as_str().unwrap()).unwrap();
        pattern.is_match(value)
            && json["minLength"].as_u64().is_none_or(|m| chars as u64 >= m)
            && json["maxLength"].as_u64().is_none_or(|m| chars as u64 <= m)
    }

    #[test]
    fn each_name_schema_admits_exactly_what_its_rule_accepts() {
        for name in samples() {
            assert_eq!(
                admits(&collection_name(), &name),
                collection_name_problem(&name).is_none(),
                "collection name {name:?}"
            );
            assert_eq!(
                admits(&tenant(), &name),
                tenant_problem(&name).is_none(),
                "tenant {name:?}"
            );
            assert_eq!(
                admits(&optional_tenant(), &name),
                name.is_empty() || tenant_problem(&name).is_none(),
                "optional tenant {name:?}"
            );
            assert_eq!(
                admits(&snapshot_id(), &name),
                snapshot_id_problem(&name).is_none(),
                "snapshot id {name:?}"
            );
            assert_eq!(
                admits(&job_id(), &name),
                job_id_problem(&name).is_none(),
                "job id {name:?}"
            );
            assert_eq!(
                admits(&embedder_model(), &name),
                embedder_model_problem(&name).is_none(),
                "embedder model {name:?}"
            );
            assert_eq!(
                admits(&key_id(), &name),
                key_id_problem(&name).is_none(),
                "key id {name:?}"
            );
        }
        assert!(admits(&key_id(), "0123456789ab"));
    }

    #[test]
    fn the_key_lifetime_pattern_is_what_parses_as_a_duration_or_empty() {
        let pattern = Regex::new(KEY_LIFETIME_PATTERN).unwrap();
        let mut samples = samples();
        samples.extend(
            [
                "30d", "12h", "90m", "3600s", "0d", "00d", "007h", "+5d", "-5d", " 5d", "5d ",
                "5 d", "5",
            ]
            .map(String::from),
        );
        for text in samples {
            assert_eq!(
                pattern.is_match(&text),
                text.is_empty() || parse_duration_ms(&text).is_some(),
                "{text:?}"
            );
        }
    }
}
