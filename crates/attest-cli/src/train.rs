//! `attest train verifier`: fits the local verifier on HaluEval QA and writes the model file the answer tier
//! loads (committed as `crates/attest-answer/models/verifier.json`).

use std::path::PathBuf;

use anyhow::Context;
use attest_answer::verifier::train::{load_items, train_verifier};

use crate::cli::TrainCommand;

pub fn run(cmd: TrainCommand) -> anyhow::Result<()> {
    match cmd {
        TrainCommand::Verifier { data, out, json } => {
            let items_path = if data.is_dir() {
                data.join("items.jsonl")
            } else {
                data.clone()
            };
            let items = load_items(&items_path)
                .with_context(|| format!("reading {}", items_path.display()))?;
            anyhow::ensure!(!items.is_empty(), "{} holds no items", items_path.display());
            let source = format!(
                "halueval-qa ({} items from {})",
                items.len(),
                items_path.display()
            );
            let file = train_verifier(&items, &source);
            write_model(&out, &serde_json::to_string_pretty(&file)?)?;
            if json {
                println!(
                    "{}",
                    serde_json::json!({"out": out, "train_items": file.train_items, "heldout_items": file.heldout_items,
                        "heldout_auroc": file.heldout_auroc, "heldout_balanced_accuracy": file.heldout_balanced_accuracy})
                );
            } else {
                println!(
                    "verifier trained on {} items, held out {}: AUROC {:.3}, balanced accuracy {:.3}; written to {}",
                    file.train_items,
                    file.heldout_items,
                    file.heldout_auroc,
                    file.heldout_balanced_accuracy,
                    out.display()
                );
            }
            Ok(())
        }
    }
}

/// Writes through a temporary file and a rename, so a crash never leaves half a model.
fn write_model(out: &PathBuf, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = out.with_extension("json.tmp");
    std::fs::write(&tmp, format!("{text}\n"))?;
    std::fs::rename(&tmp, out)?;
    Ok(())
}
