//! `attest-lab train verifier`: fits the local verifier on HaluEval QA and writes the model file the answer tier
//! loads (committed as `crates/attest-models/models/verifier.json`). `attest-lab train reranker`: the same for the
//! candidate reranker on squad-dev, with candidates from a running router (`models/reranker.json`).
//! `attest-lab train support`: the reader verifier's calibration on claim-verification sets
//! (`models/reader/support.json`). [`logistic`] fits the three and measures them (AUROC, balanced accuracy).

pub mod logistic;
pub mod reranker;
pub mod support;
pub mod verifier;

use std::path::PathBuf;
use std::time::Instant;

use self::verifier::{load_items, train_verifier};
use anyhow::Context;
use attest_answer::rerank::learned::RerankerFile;
use attest_answer::RouterClient;

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
        TrainCommand::Support {
            data,
            every,
            out,
            json,
        } => train_support(&data, every, &out, json),
        TrainCommand::Reranker {
            data,
            router,
            collection,
            out,
            limit,
            json,
        } => train_reranker(&data, &router, &collection, &out, limit, json),
    }
}

/// One data set's candidates, retrieved through the router: train, held-out and unanswerable pools.
struct SetPools {
    name: String,
    queries: usize,
    train: Vec<reranker::Pool>,
    heldout: Vec<reranker::Pool>,
    unanswerable: Vec<reranker::Pool>,
}

/// Retrieves candidates for every query of every set's split through the router, fits one reranker on all the
/// train pools, writes it and prints each set's held-out report beside the model `out` held before (when there
/// was one). Runs on a blocking thread of the CLI's runtime, so it may block on the searches.
fn train_reranker(
    data: &[PathBuf],
    router: &str,
    collections: &[String],
    out: &PathBuf,
    limit: Option<usize>,
    json: bool,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        !data.is_empty() && data.len() == collections.len(),
        "give one --collection per --data ({} data sets, {} collections)",
        data.len(),
        collections.len()
    );
    let previous = match std::fs::read_to_string(out) {
        Ok(text) => Some(
            serde_json::from_str::<RerankerFile>(&text)
                .with_context(|| format!("reading the previous model {}", out.display()))?,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(e).with_context(|| format!("reading the previous model {}", out.display()))
        }
    };
    let client = RouterClient::connect_lazy(router, None)?;
    let runtime = tokio::runtime::Handle::current();
    let started = Instant::now();
    let mut sets = Vec::new();
    for (dir, collection) in data.iter().zip(collections) {
        let queries_path = if dir.is_dir() {
            dir.join("queries.jsonl")
        } else {
            dir.to_path_buf()
        };
        let queries = reranker::load_queries(&queries_path)?;
        let total = queries.len();
        let split = reranker::split_queries(queries, limit);
        anyhow::ensure!(
            !split.train.is_empty() && !split.heldout.is_empty(),
            "{} has no answerable queries with `<set>-aNNNN-pNNN` gold paragraphs in both splits",
            queries_path.display()
        );
        let config = reranker::TrainConfig {
            collection: collection.clone(),
            limit,
            ..Default::default()
        };
        let mut pools = Vec::new();
        for (group_name, group) in [
            ("train", &split.train),
            ("held-out", &split.heldout),
            ("unanswerable", &split.unanswerable),
        ] {
            eprintln!(
                "{}: retrieving candidates for {} {group_name} queries…",
                dir.display(),
                group.len()
            );
            pools.push(
                runtime
                    .block_on(reranker::retrieve(&client, group, &config))
                    .with_context(|| format!("router {router}, collection {collection}"))?,
            );
        }
        let [train, heldout, unanswerable]: [Vec<reranker::Pool>; 3] =
            pools.try_into().expect("three groups");
        sets.push(SetPools {
            name: dir
                .file_name()
                .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into()),
            queries: total,
            train,
            heldout,
            unanswerable,
        });
    }
    let retrieve_s = started.elapsed().as_secs_f64();
    let source = sets
        .iter()
        .map(|s| format!("{} ({} of {} queries)", s.name, s.train.len(), s.queries))
        .collect::<Vec<_>>()
        .join(", ")
        + &limit.map_or(String::new(), |l| format!(", at most {l} per group"));
    // Moved, not cloned: the train pools (a million candidates and more) are not read again.
    let train: Vec<reranker::Pool> = sets
        .iter_mut()
        .flat_map(|s| std::mem::take(&mut s.train))
        .collect();
    let config = reranker::TrainConfig {
        collection: collections.join(", "),
        limit,
        ..Default::default()
    };
    let mut file = reranker::train_reranker(
        &train,
        &sets[0].heldout,
        &sets[0].unanswerable,
        &config,
        &source,
    )?;
    if sets.len() > 1 {
        // The first set's report is `file.heldout`, already judged by `train_reranker` on the same pools.
        let first = (sets[0].name.clone(), file.heldout.clone());
        let others = sets[1..].iter().map(|s| {
            let report = reranker::evaluate(
                &file.model,
                &s.heldout,
                &s.unanswerable,
                &config.gate_thresholds,
            );
            (s.name.clone(), report)
        });
        file.heldout_by_set = std::iter::once(first).chain(others).collect();
    }
    // The model `out` held before, judged on the same candidates: what the new one is compared against.
    let previous_ndcg: Vec<(String, f64)> = previous
        .iter()
        .flat_map(|p| {
            sets.iter().map(|s| {
                let r = reranker::evaluate(
                    &p.model,
                    &s.heldout,
                    &s.unanswerable,
                    &config.gate_thresholds,
                );
                (s.name.clone(), r.learned.ndcg_at_10)
            })
        })
        .collect();
    write_model(out, &serde_json::to_string_pretty(&file)?)?;
    let h = &file.heldout;
    if json {
        println!(
            "{}",
            serde_json::json!({"out": out, "train_queries": file.train_queries, "train_rows": file.train_rows,
                "retrieve_s": retrieve_s, "train_s": started.elapsed().as_secs_f64() - retrieve_s, "heldout": h,
                "heldout_by_set": file.heldout_by_set, "previous_ndcg_at_10": previous_ndcg})
        );
        return Ok(());
    }
    println!(
        "reranker trained on {} queries ({} candidates) in {:.0} s, written to {}",
        file.train_queries,
        file.train_rows,
        started.elapsed().as_secs_f64(),
        out.display()
    );
    println!(
        "held out ({}): {} answerable queries ({} with the gold paragraph among the candidates)",
        sets[0].name, h.queries, h.queries_with_gold
    );
    println!("  order        nDCG@10  MRR@10  recall@10");
    for (name, m) in [
        ("router", h.router),
        ("learned", h.learned),
        ("lexical", h.lexical),
    ] {
        println!(
            "  {name:<12} {:.4}   {:.4}  {:.4}",
            m.ndcg_at_10, m.mrr_at_10, m.recall_at_10
        );
    }
    println!(
        "  AUROC (gold paragraph vs other candidates): learned {:.4}, lexical {:.4}",
        h.auroc_learned, h.auroc_lexical
    );
    println!("  top score: share of queries at or above each gate threshold (median)");
    for (name, s) in [
        ("learned, answerable", &h.top_learned_answerable),
        ("learned, unanswerable", &h.top_learned_unanswerable),
        ("lexical, answerable", &h.top_lexical_answerable),
        ("lexical, unanswerable", &h.top_lexical_unanswerable),
    ] {
        let cells: Vec<String> = s
            .at_least
            .iter()
            .map(|(t, share)| format!("≥{t:.2}: {share:.3}"))
            .collect();
        println!(
            "  {name:<22} n={:<5} {}  (median {:.3})",
            s.queries,
            cells.join("  "),
            s.median
        );
    }
    for (set, r) in &file.heldout_by_set {
        println!(
            "held out {set}: {} queries, nDCG@10 router {:.4}, learned {:.4}, lexical {:.4}",
            r.queries, r.router.ndcg_at_10, r.learned.ndcg_at_10, r.lexical.ndcg_at_10
        );
    }
    for (set, ndcg) in &previous_ndcg {
        println!(
            "held out {set}: the previous model at {} gave nDCG@10 {ndcg:.4}",
            out.display()
        );
    }
    Ok(())
}

/// Reads every set's held-in items (every `every`-th) and held-out items with the committed reader, fits the
/// calibration on the former, scores it on the latter, writes it and prints the held-out figures.
fn train_support(data: &[PathBuf], every: usize, out: &PathBuf, json: bool) -> anyhow::Result<()> {
    use self::support::Example;
    use crate::eval::verifier_data::{items_path, load, Split};
    use attest_answer::reader::{Reader, ReaderConfig, ReaderVerifier};
    use attest_answer::verifier::calibration::{input_names, CalibrationFile};
    anyhow::ensure!(every >= 1, "--every must be at least 1");
    let reader = Reader::from_config(&ReaderConfig::default())?
        .context("the reader back end is lexical: nothing to calibrate")?;
    let verifier = ReaderVerifier::new(reader);
    let started = Instant::now();
    let (mut train, mut heldout) = (Vec::new(), Vec::new());
    for path in data {
        let path = items_path(path);
        let set = crate::eval::verifier_data::set_name(&path);
        for (split, step, into) in [
            (Split::Heldin, every, &mut train),
            (Split::Heldout, 1, &mut heldout),
        ] {
            let items = load(&path, split)?;
            anyhow::ensure!(
                split == Split::Heldout || !items.is_empty(),
                "{} has no held-in items to fit on",
                path.display()
            );
            let bar =
                crate::eval::run::progress(items.len().div_ceil(step), &format!("{set} {split:?}"));
            for item in items.iter().step_by(step) {
                bar.inc(1);
                into.push(Example {
                    set: set.clone(),
                    inputs: item.support_inputs(&verifier),
                    supported: item.supported(),
                });
            }
            bar.finish_and_clear();
        }
    }
    let model = support::fit(&train);
    let mut scores = std::collections::BTreeMap::new();
    for e in &heldout {
        scores.entry(e.set.clone()).or_insert_with(Vec::new).push(e);
    }
    let heldout_scores: std::collections::BTreeMap<_, _> = scores
        .into_iter()
        .map(|(set, examples)| (set, support::score(&model, &examples)))
        .collect();
    let names: Vec<String> = data.iter().map(|p| p.display().to_string()).collect();
    let file = CalibrationFile {
        features: input_names(),
        model,
        trained_on: format!(
            "every {every}th held-in item of {} with the committed reader",
            names.join(", ")
        ),
        split: "held out: HaluEval items hqNNNNN with NNNNN % 5 == 0; claim/evidence items marked heldout, else line % 10 == 9".into(),
        train_items: train.len(),
        heldout: heldout_scores,
    };
    write_model(out, &serde_json::to_string_pretty(&file)?)?;
    if json {
        println!(
            "{}",
            serde_json::json!({"out": out, "train_items": file.train_items, "heldout": file.heldout,
                "seconds": started.elapsed().as_secs_f64()})
        );
    } else {
        println!(
            "support calibration fitted on {} held-in items in {:.0} s, written to {}",
            file.train_items,
            started.elapsed().as_secs_f64(),
            out.display()
        );
        for (set, s) in &file.heldout {
            println!(
                "  held out {set}: {} items, AUROC {:.3}, balanced accuracy {:.3} at 0.5",
                s.items, s.auroc, s.balanced_accuracy
            );
        }
    }
    Ok(())
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
