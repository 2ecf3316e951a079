//! `attest-lab eval`: the quality gate. Ingests a BEIR-layout data set into a fresh in-process cluster (the same
//! shard nodes, router and answer tier `attest dev` runs), then measures retrieval per lane, the answer tier's
//! 2×2 (answered/abstained × answerable/unanswerable), stage latencies and, optionally, the claim verifier;
//! prints a table, writes the JSON report and the risk–coverage plot, compares against a baseline report and
//! sweeps the abstention threshold into the collection's thresholds in meta.
//!
//! # Layout
//! - [`adversarial`]: unanswerable questions whose topic is in the corpus (answer sentence removed).
//! - [`data`]: the data set (corpus, queries with answerable flags, qrels) and its hash.
//! - [`metrics`]: nDCG / recall / MRR, percentiles, the risk–coverage curve and its operating point.
//! - [`perturbed`]: answerable questions with a number or name changed so that nothing answers them.
//! - [`questions`]: each question's record (`--per-question`) and the breakdowns by `domain` and `kind`.
//! - [`reader_rerank`]: the readers as a second-stage reranker (`--reader-rerank`), a lane to measure.
//! - [`run`]: running retrieval and questions against the in-process cluster.
//! - [`report`]: the JSON report, the table, the baseline comparison.
//! - [`plot`]: the risk–coverage PNG.
//! - [`verifier_data`]: held-out claim-verification items (HaluEval QA, or claim/evidence like VitaminC).

pub mod adversarial;
pub mod data;
pub mod metrics;
pub mod perturbed;
pub mod plot;
pub mod questions;
pub mod reader_rerank;
pub mod report;
pub mod run;
pub mod verifier_data;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use attest_core::settings::CollectionThresholds;
use sha2::{Digest, Sha256};

use crate::cli::EvalArgs;
use attest_node::config;

use self::data::{Articles, EvalSet};
use self::reader_rerank::ReaderRerank;
use self::report::{compare, table, GateLimits, Report};

/// Stores a collection's answer thresholds in a running cluster's meta, through its router (the caller's key
/// from `ATTEST_API_KEY`, as the `attest` client commands take it).
async fn put_thresholds(
    server: &str,
    collection: &str,
    thresholds: &CollectionThresholds,
) -> anyhow::Result<()> {
    let url = format!(
        "{}/v1/collections/{collection}/thresholds",
        server.trim_end_matches('/')
    );
    let mut request = reqwest::Client::new().put(url).json(thresholds);
    if let Ok(key) = std::env::var("ATTEST_API_KEY") {
        request = request.bearer_auth(key);
    }
    let response = request.send().await?;
    let status = response.status();
    anyhow::ensure!(
        status.is_success(),
        "{status}: {}",
        response.text().await.unwrap_or_default()
    );
    Ok(())
}

/// Runs the evaluation; the exit code is non-zero when the baseline gate fails.
pub async fn eval(args: EvalArgs) -> anyhow::Result<i32> {
    let started = std::time::Instant::now();
    let cfg = config::load(args.config.as_deref(), std::env::vars())?;
    let mut set = EvalSet::load(&args.data)?;
    set.keep_articles(Articles::from_flags(
        args.heldout,
        args.heldin,
        args.tuning_slice,
    ));
    set.sample(args.every, args.limit);
    // A bad --reader-rerank is refused before a cluster is started.
    let reordering = args
        .reader_rerank
        .map(|depth| {
            ReaderRerank::settings(
                &cfg.answer.rerank.readers,
                depth,
                args.reader_rerank_weight,
                args.reader_rerank_sentences,
            )
        })
        .transpose()?;
    let scratch;
    let data_dir: PathBuf = match &args.data_dir {
        Some(d) => d.clone(),
        None => {
            scratch = tempfile::tempdir().context("creating a scratch data directory")?;
            scratch.path().to_path_buf()
        }
    };
    let stack = attest_node::local::LocalStack::start(
        &cfg,
        &data_dir,
        args.shards,
        args.model_dir.clone(),
        None,
        None,
        attest_proto::ClusterCredential::none(),
    )
    .await?;
    let collection = args.collection.clone();
    let skipped = run::ingest(&stack, &collection, &set.corpus, args.shards).await?;
    let readers = reordering
        .map(|settings| ReaderRerank::new(&stack, settings).map(Arc::new))
        .transpose()?;
    let retrieval = run::retrieval(&stack, &collection, &set, readers).await?;
    let asked = if args.retrieval_only {
        run::Answers::default()
    } else {
        run::answers(&stack, &collection, &set).await?
    };
    if let Some(path) = &args.per_question {
        write_atomically(path, &questions::to_jsonl(&asked.questions)?)?;
        println!(
            "per-question results: {} ({} lines)",
            path.display(),
            asked.questions.len()
        );
    }
    let mut report = Report {
        retrieval,
        answers: asked.scores,
        latency_ms: asked.latency_ms,
        risk_coverage: asked.risk_coverage,
        skipped: report::Skipped::of(&skipped, &set.qrels),
        ..Default::default()
    };
    if let Some(n) = args.adversarial.filter(|n| *n > 0) {
        let adv = adversarial::build(&set, n);
        let name = format!("{collection}-adversarial");
        let adv_skipped = run::ingest(&stack, &name, &adv.corpus, args.shards).await?;
        if !adv_skipped.is_empty() {
            tracing::warn!(
                skipped = adv_skipped.len(),
                event = "eval_documents_skipped",
                "adversarial corpus documents refused at ingest"
            );
        }
        report.adversarial = Some(run::adversarial(&stack, &name, &adv.questions).await?);
        // Question perturbation: the whole collection, a question it no longer answers.
        let perturbed = perturbed::build(&set, n);
        report.perturbed = Some(run::adversarial(&stack, &collection, &perturbed).await?);
    }
    if !args.verifier_data.is_empty() {
        let verifier = stack.answer.verifier();
        for path in &args.verifier_data {
            let name = verifier_data::set_name(path);
            report
                .verifier
                .insert(name, run::verifier(&cfg.answer, verifier.as_ref(), path)?);
        }
    }
    report.meta = report::Meta {
        timestamp: now_rfc3339(),
        git_commit: git_commit(),
        config_hash: hex::encode(Sha256::digest(serde_json::to_vec(&cfg)?)),
        data: set.dir.display().to_string(),
        data_hash: set.hash.clone(),
        corpus_docs: set.corpus.len(),
        wall_s: started.elapsed().as_secs_f64(),
    };

    println!("{}", table(&report));
    if let Some(s) = &report.skipped {
        println!(
            "skipped at ingest: {} documents ({} relevance judgements point at them), e.g. {:?}",
            s.documents,
            s.qrels_pointing_at_skipped,
            s.examples.first()
        );
    }
    if let Some(out) = &args.json {
        write_atomically(out, &serde_json::to_string_pretty(&report)?)?;
        let png = out.with_extension("png");
        plot::risk_coverage_png(&report.risk_coverage, &png)?;
        println!(
            "report: {} (risk–coverage curve: {})",
            out.display(),
            png.display()
        );
    }
    if args.sweep {
        let point = metrics::operating_point(&report.risk_coverage, args.hallucination_budget)
            .context("no abstention threshold keeps the hallucination rate within the budget")?;
        let thresholds = CollectionThresholds {
            min_confidence: point.threshold,
            hallucination_budget: Some(args.hallucination_budget),
            coverage: Some(point.coverage),
            hallucination_rate: Some(point.hallucination_rate),
            data_hash: Some(set.hash.clone()),
        };
        // Into this run's meta (kept with --data-dir), and into a running cluster's with --apply-to.
        stack
            .router
            .collections()
            .set_thresholds(&collection, Some(thresholds.clone()))
            .await?;
        let mut written = vec![format!("meta under {}", data_dir.display())];
        if let Some(server) = &args.apply_to {
            put_thresholds(server, &collection, &thresholds)
                .await
                .with_context(|| format!("storing the thresholds through {server}"))?;
            written.push(server.clone());
        }
        println!(
            "operating point: min_confidence {:.2} → coverage {:.4}, hallucination {:.4} (budget {:.4}); written to {}",
            point.threshold, point.coverage, point.hallucination_rate, args.hallucination_budget, written.join(" and ")
        );
    }
    if let Some(base) = &args.baseline {
        let text = std::fs::read_to_string(base)
            .with_context(|| format!("reading the baseline {}", base.display()))?;
        let base: Report = serde_json::from_str(&text)
            .with_context(|| format!("{} is not an `attest-lab eval` report", base.display()))?;
        let (lines, failures) = compare(&report, &base, GateLimits::default());
        println!(
            "against the baseline {}:",
            args.baseline
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        );
        for l in lines {
            println!("  {l}");
        }
        if !failures.is_empty() {
            for f in &failures {
                eprintln!("quality gate failed: {f}");
            }
            return Ok(1);
        }
        println!("quality gate passed");
    }
    Ok(0)
}

fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{text}\n"))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

pub(crate) fn git_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// UTC now as RFC 3339 (seconds).
pub(crate) fn now_rfc3339() -> String {
    attest_core::clock::UtcTime::now().rfc3339()
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps_are_rfc3339() {
        let t = super::now_rfc3339();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.starts_with("20") && t.ends_with('Z') && t.as_bytes()[10] == b'T');
    }
}
