//! Which directories a node admits as snapshot destinations, like Elasticsearch's `path.repo`: only those under
//! the roots its operator configured (`snapshots.allowed_roots`, `--snapshot-root DIR`), and never a node's data
//! directory, anything inside it or anything containing it. The destination is named by whoever calls the API;
//! the roots are the operator's, so a request can neither write nor delete outside them. `s3://` destinations are
//! not directories and pass as they are.
//!
//! A directory destination must be absolute and have no `..` component; it is then resolved (every symbolic link
//! in the part that exists followed) and the resolved path must still lie under a root, clear of every protected
//! directory. The router and the shard nodes check alike, each where it opens the store
//! ([`DestinationPolicy::open`]).

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{directory_of, SnapshotStore, StoreError};

/// The `snapshots` section of a node's configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SnapshotsConfig {
    /// The directories under which directory destinations are admitted (each created at start when missing);
    /// `--snapshot-root DIR` adds one. Empty: no directory destination (`attest dev`: `<data-dir>/snapshots`).
    pub allowed_roots: Vec<PathBuf>,
}

/// The roots a node admits directory destinations under, and the directories no destination may touch.
/// The default admits no directory at all.
#[derive(Debug, Clone, Default)]
pub struct DestinationPolicy {
    /// Each root resolved (canonical), in the configured order.
    roots: Vec<PathBuf>,
    /// Each root as configured, made absolute: a destination under one of these whose resolved path is under
    /// none of `roots` went through a symbolic link.
    given: Vec<PathBuf>,
    /// The node's data directories, absolute (resolved when checked: they may not exist yet).
    protected: Vec<PathBuf>,
}

fn absolute(path: &Path) -> Result<PathBuf, String> {
    std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn has_parent_component(path: &Path) -> bool {
    path.components().any(|c| matches!(c, Component::ParentDir))
}

/// `path` with every symbolic link of its existing part followed (the rest appended as written). A link that
/// leads nowhere is refused: creating the destination would follow it wherever it comes to point.
fn resolve(path: &Path) -> Result<PathBuf, String> {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        match std::fs::canonicalize(&existing) {
            Ok(mut resolved) => {
                resolved.extend(rest.iter().rev());
                return Ok(resolved);
            }
            Err(_) if std::fs::symlink_metadata(&existing).is_ok() => {
                return Err(format!(
                    "{} cannot be resolved (a symbolic link that leads nowhere?)",
                    existing.display()
                ));
            }
            Err(_) => match (existing.parent(), existing.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_os_string());
                    existing = parent.to_path_buf();
                }
                _ => return Ok(path.to_path_buf()),
            },
        }
    }
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl DestinationPolicy {
    /// Admits directories under `roots` (each created when missing, then resolved), never touching
    /// `protected` (a node's data directories). A root inside a protected directory is refused.
    pub fn new(roots: &[PathBuf], protected: &[PathBuf]) -> Result<DestinationPolicy, String> {
        let protected = protected
            .iter()
            .map(|p| absolute(p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut policy = DestinationPolicy {
            roots: Vec::new(),
            given: Vec::new(),
            protected,
        };
        for root in roots {
            let why = |m: String| format!("snapshots.allowed_roots: {}: {m}", root.display());
            let given = absolute(root).map_err(why)?;
            if has_parent_component(&given) {
                return Err(why("a `..` component is not allowed".into()));
            }
            std::fs::create_dir_all(&given).map_err(|e| why(format!("cannot create it: {e}")))?;
            let resolved = std::fs::canonicalize(&given).map_err(|e| why(e.to_string()))?;
            if let Some(d) = policy.overlapping(&resolved) {
                if resolved.starts_with(&d) {
                    return Err(why(format!(
                        "it is inside the node's data directory {}, which no snapshot may touch",
                        d.display()
                    )));
                }
            }
            policy.roots.push(resolved);
            policy.given.push(given);
        }
        Ok(policy)
    }

    /// The roots, resolved.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The protected directory `resolved` is inside of or contains, if any.
    fn overlapping(&self, resolved: &Path) -> Option<PathBuf> {
        self.protected.iter().find_map(|d| {
            let d = resolve(d).unwrap_or_else(|_| d.clone());
            (resolved.starts_with(&d) || d.starts_with(resolved)).then_some(d)
        })
    }

    /// The directory a destination names, resolved, when this node admits it; `None` for `s3://`. The error
    /// says which rule refused it.
    pub fn check(&self, location: &str) -> Result<Option<PathBuf>, String> {
        let location = location.trim();
        if location.starts_with("s3://") {
            return Ok(None);
        }
        let path = directory_of(location)?;
        if !path.is_absolute() {
            return Err("a directory destination must be an absolute path".into());
        }
        if has_parent_component(&path) {
            return Err("a `..` component is not allowed in a snapshot destination".into());
        }
        if self.roots.is_empty() {
            return Err(
                "this node admits no directory as a snapshot destination: its operator sets \
                 snapshots.allowed_roots (or --snapshot-root DIR); or use s3://bucket[/prefix]"
                    .into(),
            );
        }
        let resolved = resolve(&path)?;
        if let Some(d) = self.overlapping(&resolved) {
            let how = if resolved.starts_with(&d) {
                "is inside"
            } else {
                "contains"
            };
            return Err(format!(
                "{} {how} the node's data directory {}; a snapshot destination never touches it",
                resolved.display(),
                d.display()
            ));
        }
        if !self.roots.iter().any(|r| resolved.starts_with(r)) {
            if self.given.iter().any(|r| path.starts_with(r)) {
                return Err(format!(
                    "a symbolic link in {} leads to {}, outside the allowed snapshot roots ({})",
                    path.display(),
                    resolved.display(),
                    list(&self.roots)
                ));
            }
            return Err(format!(
                "{} is outside the allowed snapshot roots ({}); its operator adds roots with \
                 snapshots.allowed_roots or --snapshot-root",
                path.display(),
                list(&self.roots)
            ));
        }
        Ok(Some(resolved))
    }

    /// Opens the destination when this node admits it ([`StoreError::BadLocation`] naming the rule if not):
    /// a directory at its resolved path.
    pub fn open(&self, location: &str) -> Result<SnapshotStore, StoreError> {
        let bad = |why: String| StoreError::BadLocation(format!("{:?}: {why}", location.trim()));
        match self.check(location).map_err(bad)? {
            None => SnapshotStore::open(location),
            Some(dir) => {
                let dir = dir
                    .to_str()
                    .ok_or_else(|| bad("the path is not UTF-8".into()))?;
                SnapshotStore::open(dir)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `<tmp>/root` (the allowed root, holding `sub/`), `<tmp>/data` (a node's data directory, holding
    /// `shard-node-0/`), `<tmp>/outside`; links `root/to-data`, `root/to-outside`, `root/nowhere` (dangling)
    /// and `root/inner` (to `root/sub`).
    struct Layout {
        _tmp: tempfile::TempDir,
        base: PathBuf,
        policy: DestinationPolicy,
    }

    fn layout() -> Layout {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        for dir in ["root/sub", "data/shard-node-0", "outside"] {
            std::fs::create_dir_all(base.join(dir)).unwrap();
        }
        let link = |to: &str, at: &str| std::os::unix::fs::symlink(base.join(to), base.join(at));
        link("data", "root/to-data").unwrap();
        link("outside", "root/to-outside").unwrap();
        link("missing", "root/nowhere").unwrap();
        link("root/sub", "root/inner").unwrap();
        let policy = DestinationPolicy::new(&[base.join("root")], &[base.join("data")]).unwrap();
        Layout {
            _tmp: tmp,
            base,
            policy,
        }
    }

    fn refused(l: &Layout, location: &str, rule: &str) {
        let e = l.policy.check(location).expect_err(location);
        assert!(e.contains(rule), "{location}: {e}");
        let e = l.policy.open(location).unwrap_err();
        assert!(matches!(e, StoreError::BadLocation(_)), "{location}: {e}");
    }

    #[test]
    fn directories_under_a_root_are_admitted_resolved() {
        let l = layout();
        let b = &l.base;
        for (given, resolved) in [
            ("root", "root"),
            ("root/sub", "root/sub"),
            ("root/new/deeper", "root/new/deeper"),
            ("root/./sub", "root/sub"),
            ("root/inner/x", "root/sub/x"),
        ] {
            let location = b.join(given).display().to_string();
            assert_eq!(
                l.policy.check(&location).unwrap(),
                Some(b.join(resolved)),
                "{given}"
            );
        }
        let url = format!("file://{}", b.join("root/sub").display());
        assert_eq!(l.policy.check(&url).unwrap(), Some(b.join("root/sub")));
        assert_eq!(l.policy.check("s3://bucket/prefix").unwrap(), None);
        l.policy
            .open(&b.join("root/made").display().to_string())
            .unwrap();
        assert!(b.join("root/made").is_dir());
    }

    #[test]
    fn every_escape_is_refused_naming_its_rule() {
        let l = layout();
        let at = |p: &str| l.base.join(p).display().to_string();
        refused(&l, &at("root/../outside"), "`..`");
        refused(&l, &at("root/sub/../../data"), "`..`");
        refused(&l, "relative/dir", "absolute");
        refused(&l, &at("outside"), "outside the allowed snapshot roots");
        refused(&l, "/etc", "outside the allowed snapshot roots");
        refused(&l, &at("root/to-outside"), "a symbolic link in");
        refused(&l, &at("root/to-outside/deeper"), "a symbolic link in");
        refused(&l, &at("root/nowhere"), "cannot be resolved");
        refused(&l, &at("data"), "is inside the node's data directory");
        refused(
            &l,
            &at("data/shard-node-0"),
            "is inside the node's data directory",
        );
        refused(
            &l,
            &at("root/to-data"),
            "is inside the node's data directory",
        );
        refused(
            &l,
            &l.base.display().to_string(),
            "contains the node's data directory",
        );
        refused(&l, "/", "contains the node's data directory");
        let none = DestinationPolicy::default();
        let e = none.check(&at("root")).unwrap_err();
        assert!(e.contains("snapshots.allowed_roots"), "{e}");
        assert_eq!(none.check("s3://b").unwrap(), None);
    }

    #[test]
    fn a_root_inside_a_data_directory_is_refused_and_missing_roots_are_created() {
        let l = layout();
        let e =
            DestinationPolicy::new(&[l.base.join("data/x")], &[l.base.join("data")]).unwrap_err();
        assert!(e.contains("inside the node's data directory"), "{e}");
        let made = l.base.join("fresh/root");
        let p = DestinationPolicy::new(std::slice::from_ref(&made), &[]).unwrap();
        assert!(made.is_dir());
        assert_eq!(p.roots(), [made]);
    }

    proptest! {
        /// Whatever path is asked for, under the root or not, through links or `..`: an admitted directory
        /// resolves under the root and clear of the data directory, and no `..` is ever admitted.
        #[test]
        fn an_admitted_destination_never_leaves_the_root(
            parts in prop::collection::vec(
                prop::sample::select(vec![
                    "sub", "x", "..", ".", "to-data", "to-outside", "inner", "nowhere", "root", "data",
                ]),
                0..6,
            ),
            from_base in any::<bool>(),
        ) {
            let l = layout();
            let mut path = if from_base { l.base.clone() } else { l.base.join("root") };
            for p in &parts {
                path.push(p);
            }
            let location = path.display().to_string();
            match l.policy.check(&location) {
                Ok(Some(resolved)) => {
                    prop_assert!(!parts.contains(&".."), "{location}");
                    prop_assert!(resolved.starts_with(l.base.join("root")), "{location} -> {resolved:?}");
                    prop_assert!(!resolved.starts_with(l.base.join("data")), "{location}");
                    prop_assert!(!resolved.starts_with(l.base.join("outside")), "{location}");
                }
                Ok(None) => prop_assert!(false, "{location} taken for s3"),
                Err(_) => {}
            }
        }
    }
}
