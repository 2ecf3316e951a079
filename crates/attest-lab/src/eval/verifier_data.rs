//! Claim-verification data for `attest-lab eval --verifier-data`, in either layout, held-out items only:
//! - HaluEval QA (`knowledge`, `question`, `answer`, `label` 1/0): held out when the id `hqNNNNN` has
//!   NNNNN % 5 == 0 (the split the verifiers were trained with);
//! - claim/evidence (`claim`, `evidence`, `label` `True`/`False`/`Neither` or a boolean), the layout of
//!   VitaminC and of the synthetic contrastive pairs of `scripts/reader`: held out when the item says
//!   `"split": "heldout"`, else when its 0-based line index % 10 == 9 (VitaminC's held-out slice).

use std::path::{Path, PathBuf};

use anyhow::Context;
use attest_answer::reader::ReaderVerifier;
use attest_answer::verifier::calibration::SupportInputs;
use attest_answer::verifier::Verifier;
use serde_json::Value;

/// One held-out item: how the verifier is asked, and whether the evidence supports the claim.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Answer {
        question: String,
        answer: String,
        evidence: String,
        supported: bool,
    },
    Claim {
        claim: String,
        evidence: String,
        supported: bool,
    },
}

impl Item {
    pub fn supported(&self) -> bool {
        match self {
            Item::Answer { supported, .. } | Item::Claim { supported, .. } => *supported,
        }
    }

    /// What the reader verifier's calibration reads for the item, asked as [`Item::score`] asks it.
    pub fn support_inputs(&self, verifier: &ReaderVerifier) -> SupportInputs {
        match self {
            Item::Answer {
                question,
                answer,
                evidence,
                ..
            } => verifier.inputs_answer(question, answer, evidence),
            Item::Claim {
                claim, evidence, ..
            } => verifier.inputs_in("", claim, "", evidence),
        }
    }

    /// The verifier's support score for the item.
    pub fn score(&self, verifier: &dyn Verifier) -> f64 {
        match self {
            Item::Answer {
                question,
                answer,
                evidence,
                ..
            } => verifier.support_answer(question, answer, evidence),
            Item::Claim {
                claim, evidence, ..
            } => verifier.support_in("", claim, "", evidence),
        }
    }
}

/// A set's name: its directory (`…/vitaminc-train/items.jsonl`, `…/halueval-qa`) or its file stem.
pub fn set_name(path: &Path) -> String {
    let named = if path.ends_with("items.jsonl") {
        path.parent()
    } else {
        Some(path)
    };
    named
        .and_then(Path::file_stem)
        .map_or("verifier".into(), |n| n.to_string_lossy().into_owned())
}

/// `dir/items.jsonl` for a directory, else the file itself.
pub fn items_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("items.jsonl")
    } else {
        path.to_path_buf()
    }
}

fn str_field<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get(field).and_then(Value::as_str)
}

fn label(v: &Value) -> Option<bool> {
    match v.get("label")? {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => Some(n.as_i64()? == 1),
        Value::String(s) => Some(s == "True" || s == "SUPPORTS" || s == "1"),
        _ => None,
    }
}

/// Which part of a claim-verification file to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// The held-out items (reported on).
    Heldout,
    /// The rest (what calibration may be fitted on).
    Heldin,
}

/// The held-out items of a file in either layout.
pub fn load_heldout(path: &Path) -> anyhow::Result<Vec<Item>> {
    let items = load(path, Split::Heldout)?;
    anyhow::ensure!(
        !items.is_empty(),
        "{} has no held-out items",
        path.display()
    );
    Ok(items)
}

/// The items of `split` of a file in either layout (perhaps none: a file may hold one split only).
pub fn load(path: &Path, split: Split) -> anyhow::Result<Vec<Item>> {
    let wanted = split == Split::Heldout;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not JSON", path.display(), i + 1))?;
        let bad = || {
            anyhow::anyhow!(
                "{}:{}: neither a HaluEval item (knowledge, question, answer, label) nor a claim/evidence item (claim, evidence, label)",
                path.display(),
                i + 1
            )
        };
        let supported = label(&v).ok_or_else(bad)?;
        if let (Some(knowledge), Some(question), Some(answer)) = (
            str_field(&v, "knowledge"),
            str_field(&v, "question"),
            str_field(&v, "answer"),
        ) {
            if crate::train::verifier::halueval_heldout(str_field(&v, "_id").unwrap_or(""))
                == wanted
            {
                out.push(Item::Answer {
                    question: question.into(),
                    answer: answer.into(),
                    evidence: knowledge.into(),
                    supported,
                });
            }
        } else if let (Some(claim), Some(evidence)) =
            (str_field(&v, "claim"), str_field(&v, "evidence"))
        {
            let heldout = match str_field(&v, "split") {
                Some(split) => split == "heldout",
                None => i % 10 == 9,
            };
            if heldout == wanted {
                out.push(Item::Claim {
                    claim: claim.into(),
                    evidence: evidence.into(),
                    supported,
                });
            }
        } else {
            return Err(bad());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_layouts_and_their_held_out_rules() {
        let dir = tempfile::tempdir().unwrap();
        let halu = dir.path().join("h.jsonl");
        std::fs::write(
            &halu,
            r#"{"_id":"hq00005-right","knowledge":"K","question":"Q","answer":"A","label":1}
{"_id":"hq00006-right","knowledge":"K","question":"Q","answer":"A","label":1}
{"_id":"hq00010-hallu","knowledge":"K","question":"Q","answer":"B","label":0}
"#,
        )
        .unwrap();
        let items = load_heldout(&halu).unwrap();
        assert_eq!(items.len(), 2);
        assert!(items[0].supported() && !items[1].supported());
        // The held-in split is the complement: what calibration is fitted on, never what is reported.
        let heldin = load(&halu, Split::Heldin).unwrap();
        assert_eq!(heldin.len(), 1);
        assert!(matches!(&heldin[0], Item::Answer { question, .. } if question == "Q"));

        let vc = dir.path().join("v.jsonl");
        let lines: Vec<String> = (0..20)
            .map(|i| {
                let label = if i % 2 == 0 { "True" } else { "Neither" };
                format!(r#"{{"claim":"c{i}","evidence":"e","label":"{label}"}}"#)
            })
            .collect();
        std::fs::write(&vc, lines.join("\n")).unwrap();
        let items = load_heldout(&vc).unwrap();
        // Lines 9 and 19 (0-based): both odd, so not supported.
        assert_eq!(items.len(), 2);
        assert!(items.iter().all(|i| !i.supported()));
        assert_eq!(load(&vc, Split::Heldin).unwrap().len(), 18);

        let syn = dir.path().join("s.jsonl");
        std::fs::write(
            &syn,
            r#"{"claim":"c","evidence":"e","label":true,"split":"heldout"}
{"claim":"c","evidence":"e","label":false,"split":"train"}"#,
        )
        .unwrap();
        assert_eq!(load_heldout(&syn).unwrap().len(), 1);
        assert_eq!(load(&syn, Split::Heldin).unwrap().len(), 1);
        assert_eq!(
            set_name(&dir.path().join("vitaminc-train/items.jsonl")),
            "vitaminc-train"
        );
        assert_eq!(set_name(&syn), "s");

        let bad = dir.path().join("b.jsonl");
        std::fs::write(&bad, r#"{"text":"x","label":1}"#).unwrap();
        assert!(load_heldout(&bad)
            .unwrap_err()
            .to_string()
            .contains("neither"));
    }
}
