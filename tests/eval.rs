//! `attest-lab eval` through the real binary on a small fixture cut from the bundled squad sample: the report's
//! fields, the risk–coverage PNG, the threshold sweep, the baseline gate's exit code, a near-duplicate in
//! the corpus reported as skipped instead of stopping the run, and the breakdowns by the queries' `domain` and
//! `kind` with the `--per-question` file, and the readers' reordering of the reranked lane (`--reader-rerank`).

use crate::common;

use std::path::Path;
use std::process::Command;

use common::repo_root;
use serde_json::Value;

/// The first `docs` paragraphs of the sample, the questions about them, and questions whose article is absent.
fn fixture(dir: &Path, docs: usize) {
    let root = repo_root().join("data/squad-sample");
    let corpus: Vec<Value> = std::fs::read_to_string(root.join("corpus.jsonl"))
        .unwrap()
        .lines()
        .take(docs)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<&str> = corpus.iter().map(|d| d["id"].as_str().unwrap()).collect();
    let queries: Vec<String> = std::fs::read_to_string(root.join("queries.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| {
            let q: Value = serde_json::from_str(l).unwrap();
            q["answerable"] == false || ids.contains(&q["gold_doc"].as_str().unwrap_or(""))
        })
        .take(40)
        .map(str::to_string)
        .collect();
    let mut lines: Vec<String> = corpus.iter().map(Value::to_string).collect();
    // A real corpus holds near-duplicates: a copy of the first paragraph under another id.
    let mut copy = corpus[0].clone();
    copy["id"] = "copy-of-first".into();
    lines.push(copy.to_string());
    std::fs::write(dir.join("corpus.jsonl"), lines.join("\n")).unwrap();
    std::fs::write(dir.join("queries.jsonl"), queries.join("\n")).unwrap();
}

fn eval(args: &[&str]) -> (i32, String) {
    let out = Command::new(common::lab_bin())
        .arg("eval")
        .args(args)
        .env("ATTEST_LOG", "warn")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn eval_reports_sweeps_and_gates_against_a_baseline() {
    let data = tempfile::tempdir().unwrap();
    fixture(data.path(), 40);
    let out = tempfile::tempdir().unwrap();
    let report_path = out.path().join("report.json");
    let d = data.path().to_str().unwrap();
    // --sweep --apply-to stores the operating point in a running cluster's meta, through its router.
    let dev_dir = tempfile::tempdir().unwrap();
    let mut dev = common::start_dev(dev_dir.path());
    let (status, _) = common::post(
        &format!("{}/v1/collections", dev.url),
        &serde_json::json!({"name": "eval"}),
    );
    assert_eq!(status, 201);
    let (code, text) = eval(&[
        "--data",
        d,
        "--json",
        report_path.to_str().unwrap(),
        "--sweep",
        "--hallucination-budget",
        "0.5",
        "--apply-to",
        &dev.url,
    ]);
    assert_eq!(code, 0, "{text}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    for lane in ["bm25", "dense", "hybrid", "hybrid_rerank"] {
        let n = report["retrieval"][lane]["ndcg_at_10"].as_f64().unwrap();
        assert!(n > 0.5 && n <= 1.0, "{lane}: {n}");
    }
    let a = &report["answers"];
    assert!(
        a["answerable"].as_u64().unwrap() > 0 && a["unanswerable"].as_u64().unwrap() > 0,
        "{a}"
    );
    assert!(a["coverage"].as_f64().unwrap() > 0.3, "{a}");
    assert_eq!(a["citation_validity"], 1.0, "{a}");
    // Every answered unanswerable question is listed, with what it cited: as many as the rate counts.
    let listed = a["unanswerable_answered"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let counted = a["hallucination_rate"].as_f64().unwrap() * a["unanswerable"].as_f64().unwrap();
    assert_eq!(listed.len() as f64, counted.round(), "{a}");
    assert!(
        listed
            .iter()
            .all(|c| !c["doc_ids"].as_array().unwrap().is_empty()),
        "{a}"
    );
    assert!(report["latency_ms"]["total"]["p95"].as_f64().unwrap() > 0.0);
    assert_eq!(report["meta"]["data_hash"].as_str().unwrap().len(), 64);
    assert_eq!(report["skipped"]["documents"], 1, "{}", report["skipped"]);
    assert_eq!(report["skipped"]["examples"][0][0], "copy-of-first");
    assert!(report["skipped"]["examples"][0][1]
        .as_str()
        .unwrap()
        .contains("near-duplicate"));
    assert!(report["risk_coverage"].as_array().unwrap().len() > 10);
    let png = std::fs::read(report_path.with_extension("png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let (status, collection) = common::get_text(&format!("{}/v1/collections/eval", dev.url));
    assert_eq!(status, 200, "{collection}");
    dev.proc.terminate();
    let collection: Value = serde_json::from_str(&collection).unwrap();
    let sweep = &collection["thresholds"];
    assert_eq!(sweep["hallucination_budget"], 0.5, "{collection}");
    assert!(
        sweep["hallucination_rate"].as_f64().unwrap() <= 0.5,
        "{sweep}"
    );
    assert!(sweep["min_confidence"].as_f64().is_some());

    // A baseline whose accuracy is 10 points better: the gate fails with a non-zero exit.
    let mut better = report.clone();
    better["answers"]["accuracy"] = (a["accuracy"].as_f64().unwrap() + 0.10).into();
    let baseline = out.path().join("baseline.json");
    std::fs::write(&baseline, better.to_string()).unwrap();
    let (code, text) = eval(&["--data", d, "--baseline", baseline.to_str().unwrap()]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("quality gate failed: accuracy dropped"),
        "{text}"
    );
    // Against itself, it passes.
    let (code, text) = eval(&["--data", d, "--baseline", report_path.to_str().unwrap()]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("quality gate passed"), "{text}");
}

/// With an out-of-corpus policy and a scripted LLM on loopback, the questions whose article is absent get the
/// general-knowledge answer: `attest-lab eval` counts them apart, never as answered (no coverage, no hallucination).
#[test]
fn eval_counts_out_of_corpus_answers_apart() {
    use common::llm::{Kind, ScriptedLlm};
    let data = tempfile::tempdir().unwrap();
    fixture(data.path(), 10);
    let llm = ScriptedLlm::default();
    let url = llm.start();
    // The model declines every grounded answer and answers every out-of-corpus question.
    llm.always(
        Kind::Generate,
        "I cannot answer from the given passages.",
        200,
    );
    llm.always(
        Kind::OutOfCorpus,
        "A general answer, not from the corpus.",
        200,
    );
    let config = data.path().join("attest.yaml");
    std::fs::write(
        &config,
        format!("answer:\n  llm:\n    url: {url}\n  out_of_corpus:\n    enabled: true\n"),
    )
    .unwrap();
    let report_path = data.path().join("report.json");
    let (code, text) = eval(&[
        "--data",
        data.path().to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--json",
        report_path.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{text}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let a = &report["answers"];
    let out_of_corpus = a["out_of_corpus"].as_u64().unwrap();
    assert!(out_of_corpus > 0, "{a}");
    assert_eq!(
        a["reasons"]["out_of_corpus"].as_u64(),
        Some(out_of_corpus),
        "{a}"
    );
    assert_eq!(a["coverage"], 0.0, "{a}");
    assert_eq!(a["hallucination_rate"], 0.0, "{a}");
    assert!(
        text.contains(&format!(
            "out of corpus: {out_of_corpus} general-knowledge answers"
        )),
        "{text}"
    );
    assert!(!llm.requests(Kind::OutOfCorpus).is_empty());
}

/// Queries that name their kind of text (`domain`) and near-miss `kind`, as `data/company-nearmiss` does: the
/// report gives the hallucination rate and coverage of each with its 95% interval, agreeing with the
/// `--per-question` file, which has one line per question with what was asked, answered and expected.
#[test]
fn eval_breaks_down_by_domain_and_kind_and_writes_each_question() {
    let data = tempfile::tempdir().unwrap();
    fixture(data.path(), 10);
    let queries_path = data.path().join("queries.jsonl");
    let queries: Vec<Value> = std::fs::read_to_string(&queries_path)
        .unwrap()
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let mut q: Value = serde_json::from_str(l).unwrap();
            q["domain"] = ["runbook", "api"][i % 2].into();
            q["kind"] = if q["answerable"] == false {
                ["sibling_entity", "attribute_absent"][i / 2 % 2]
            } else {
                "answerable"
            }
            .into();
            q
        })
        .collect();
    let lines: Vec<String> = queries.iter().map(Value::to_string).collect();
    std::fs::write(&queries_path, lines.join("\n")).unwrap();
    let report_path = data.path().join("report.json");
    let per_question = data.path().join("questions.jsonl");
    let (code, text) = eval(&[
        "--data",
        data.path().to_str().unwrap(),
        "--json",
        report_path.to_str().unwrap(),
        "--per-question",
        per_question.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("kind of text") && text.contains("near-miss kind"),
        "{text}"
    );

    // One line per question, in the order asked, with what was asked, answered and expected.
    let asked: Vec<Value> = std::fs::read_to_string(&per_question)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(asked.len(), queries.len());
    for (line, q) in asked.iter().zip(&queries) {
        for field in ["id", "domain", "kind", "answerable", "gold_doc"] {
            assert_eq!(line[field], q[field], "{field}: {line}");
        }
        assert_eq!(line["question"], q["text"], "{line}");
        assert_eq!(line["gold_answers"], q["answers"], "{line}");
        for field in [
            "answer",
            "confidence",
            "citations",
            "reason",
            "suggestions",
            "near_miss",
            "scored",
        ] {
            assert!(line.get(field).is_some(), "{field} missing: {line}");
        }
        match line["status"].as_str().unwrap() {
            "answered" => assert!(!line["citations"].as_array().unwrap().is_empty(), "{line}"),
            "abstained" => assert!(line["reason"].is_string(), "{line}"),
            other => panic!("status {other}: {line}"),
        }
    }

    // The groups agree with the lines: hits / n for each side, the rate inside its interval.
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let a = &report["answers"];
    let check = |groups: &Value, field: &str| {
        let mut names: Vec<&str> = asked.iter().map(|l| l[field].as_str().unwrap()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(groups.as_object().unwrap().len(), names.len(), "{groups}");
        for name in names {
            let of = |answerable: bool| -> (u64, u64) {
                let side: Vec<&Value> = asked
                    .iter()
                    .filter(|l| l[field] == name && l["answerable"] == answerable)
                    .collect();
                let answered = side.iter().filter(|l| l["status"] == "answered").count();
                (answered as u64, side.len() as u64)
            };
            let g = &groups[name];
            for (side, answerable) in [("hallucination", false), ("coverage", true)] {
                let (hits, n) = of(answerable);
                if n == 0 {
                    assert!(g.get(side).is_none(), "{name}.{side}: {g}");
                    continue;
                }
                let r = &g[side];
                assert_eq!(
                    (r["hits"].as_u64(), r["n"].as_u64()),
                    (Some(hits), Some(n)),
                    "{name}.{side}: {g}"
                );
                let (rate, lo, hi) = (
                    r["rate"].as_f64().unwrap(),
                    r["lo"].as_f64().unwrap(),
                    r["hi"].as_f64().unwrap(),
                );
                assert!((rate - hits as f64 / n as f64).abs() < 1e-12, "{r}");
                assert!(lo <= rate && rate <= hi && hi - lo > 0.0, "{r}");
            }
        }
    };
    check(&a["by_domain"], "domain");
    check(&a["by_kind"], "kind");
    assert!(
        a["by_domain"]["runbook"]["hallucination"]["n"]
            .as_u64()
            .unwrap()
            > 0,
        "{a}"
    );
    assert!(
        a["by_kind"]["answerable"].get("hallucination").is_none(),
        "{a}"
    );
    // The overall rate has its interval too.
    let [lo, hi] =
        [&a["hallucination_ci95"][0], &a["hallucination_ci95"][1]].map(|v| v.as_f64().unwrap());
    let rate = a["hallucination_rate"].as_f64().unwrap();
    assert!(lo <= rate && rate <= hi && hi > 0.0, "{a}");

    // Each answer carries what the gate saw: its last retrieval grounded on a read sentence.
    for line in asked.iter().filter(|l| l["status"] == "answered") {
        let hops = line["hops"].as_array().expect("hops of an answer");
        let last = hops.last().unwrap();
        assert_eq!(last["gate"], "ground", "{line}");
        assert!(
            last["passages"][0]["sentences"].as_array().is_some(),
            "{line}"
        );
    }
    replay_reproduces_the_run(&per_question, a, data.path());
}

/// `attest-lab replay` on the run's `--per-question` file: at the run's settings every question comes out as the
/// run scored it (the trace is what the gate decided on), the figures are the report's; a ground bar no sentence
/// reaches answers nothing the run's trace grounded.
fn replay_reproduces_the_run(per_question: &Path, answers: &Value, dir: &Path) {
    let replay = |extra: &[&str], json: &Path| -> (String, Value) {
        let out = Command::new(common::lab_bin())
            .args(["replay", "--per-question", per_question.to_str().unwrap()])
            .args(["--json", json.to_str().unwrap()])
            .args(extra)
            .env("ATTEST_LOG", "warn")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        let rows = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
        (text, rows)
    };
    let (text, rows) = replay(&[], &dir.join("replay.json"));
    let n = std::fs::read_to_string(per_question)
        .unwrap()
        .lines()
        .count();
    assert!(
        text.contains(&format!("{n} of {n} questions reproduced")),
        "{text}"
    );
    let own = &rows[0]["sets"][0]["figures"];
    for (side, reported) in [
        ("hallucination", "hallucination_rate"),
        ("coverage", "coverage"),
    ] {
        let (replayed, reported) = (own[side]["rate"].as_f64(), answers[reported].as_f64());
        assert!(
            (replayed.unwrap() - reported.unwrap()).abs() < 1e-9,
            "{side}: {own} / {answers}"
        );
    }
    assert_eq!(own["approximate"], 0, "{own}");
    assert_eq!(own["unseen"], 0, "{own}");
    let (_, rows) = replay(&["--ground", "0.15,1.0"], &dir.join("replay-bars.json"));
    let at = |i: usize| &rows[i]["sets"][0]["figures"];
    assert_eq!(rows.as_array().unwrap().len(), 2, "{rows}");
    assert!(at(0)["coverage"]["hits"].as_u64().unwrap() > 0, "{rows}");
    assert_eq!(at(1)["coverage"]["hits"], 0, "{rows}");
}

/// `--reader-rerank N`: the reranked lane's best N candidates reordered by the readers, reported as a lane of
/// its own over the same questions. Reordering only the first 5 of 100 moves no document in or out of the top 10
/// or 100; with the readers' weight at 0 the order is the reranker's, every figure equal; a depth of 0 is refused.
#[test]
fn eval_reorders_the_reranked_top_by_the_readers() {
    let data = tempfile::tempdir().unwrap();
    fixture(data.path(), 40);
    let d = data.path().to_str().unwrap();
    let lanes = |weight: &str| -> Value {
        let report_path = data.path().join(format!("report-{weight}.json"));
        let (code, text) = eval(&[
            "--data",
            d,
            "--retrieval-only",
            "--reader-rerank",
            "5",
            "--reader-rerank-weight",
            weight,
            "--json",
            report_path.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{text}");
        assert!(text.contains("hybrid_rerank_reader"), "{text}");
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
        report["retrieval"].clone()
    };
    let readers = lanes("1");
    let (reranked, reordered) = (&readers["hybrid_rerank"], &readers["hybrid_rerank_reader"]);
    assert!(reranked["queries"].as_u64().unwrap() > 10, "{readers}");
    for same in ["queries", "recall_at_10", "recall_at_100"] {
        assert_eq!(reordered[same], reranked[same], "{same}: {readers}");
    }
    let n = reordered["ndcg_at_10"].as_f64().unwrap();
    assert!(n > 0.5 && n <= 1.0, "{readers}");

    let unweighted = lanes("0");
    assert_eq!(
        unweighted["hybrid_rerank_reader"], unweighted["hybrid_rerank"],
        "{unweighted}"
    );

    let (code, text) = eval(&["--data", d, "--retrieval-only", "--reader-rerank", "0"]);
    assert_ne!(code, 0, "{text}");
    assert!(
        text.contains("--reader-rerank must be at least 1"),
        "{text}"
    );
}
