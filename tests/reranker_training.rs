//! `attest-lab train reranker` over two data sets at once, through the real binaries: candidates come from a
//! running `attest dev` (each set's corpus in its own collection), one model is fitted on both sets' held-in
//! articles, and each set's held-out articles are reported — the first set's report being the model file's
//! `heldout` — beside the model the output file held before, judged on the same candidates.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::common;

use common::{call, repo_root, start_with_env, value_of, Logs};
use serde_json::{json, Value};

fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn article(id: &str) -> u32 {
    let (rest, _) = id.rsplit_once("-p").unwrap();
    rest.rsplit_once("-a").unwrap().1.parse().unwrap()
}

/// A set cut from the bundled squad sample: the paragraphs of `articles` (ids renamed from `squad-dev-` to
/// `prefix-`), the answerable questions about them and `unanswerable` questions whose article is absent.
/// Returns the corpus and the number of answerable questions per split (held-in, held-out: article % 5 == 0).
fn cut_set(
    dir: &Path,
    prefix: &str,
    articles: &[u32],
    unanswerable: std::ops::Range<usize>,
) -> (Vec<Value>, usize, usize) {
    let sample = repo_root().join("data/squad-sample");
    let rename = |id: &str| id.replacen("squad-dev", prefix, 1);
    let corpus: Vec<Value> = read_jsonl(&sample.join("corpus.jsonl"))
        .into_iter()
        .filter(|d| articles.contains(&article(d["id"].as_str().unwrap())))
        .map(|mut d| {
            d["id"] = rename(d["id"].as_str().unwrap()).into();
            d
        })
        .collect();
    let questions = read_jsonl(&sample.join("queries.jsonl"));
    let mut answerable: Vec<Value> = questions
        .iter()
        .filter(|q| {
            q["answerable"] == true && articles.contains(&article(q["gold_doc"].as_str().unwrap()))
        })
        .cloned()
        .collect();
    for q in &mut answerable {
        q["gold_doc"] = rename(q["gold_doc"].as_str().unwrap()).into();
    }
    let held_out = answerable
        .iter()
        .filter(|q| article(q["gold_doc"].as_str().unwrap()).is_multiple_of(5))
        .count();
    let absent: Vec<Value> = questions
        .iter()
        .filter(|q| q["answerable"] == false)
        .cloned()
        .collect();
    let lines: Vec<String> = answerable
        .iter()
        .chain(&absent[unanswerable])
        .map(Value::to_string)
        .collect();
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("queries.jsonl"), lines.join("\n")).unwrap();
    (corpus, answerable.len() - held_out, held_out)
}

fn train(sets: &[(&Path, &str)], grpc: &str, out: &Path) -> Value {
    let mut cmd = Command::new(common::lab_bin());
    cmd.args(["train", "reranker", "--router", grpc, "--json", "--out"])
        .arg(out);
    for (dir, collection) in sets {
        cmd.arg("--data")
            .arg(dir)
            .args(["--collection", collection]);
    }
    let run = cmd.env("ATTEST_LOG", "warn").output().unwrap();
    assert!(
        run.status.success(),
        "train reranker: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    serde_json::from_str(stdout.lines().last().expect("a JSON line")).unwrap()
}

#[test]
fn one_reranker_fitted_on_two_sets_reports_each_beside_the_previous_model() {
    let tmp = tempfile::tempdir().unwrap();
    // Articles 0 and 20 are held out (a multiple of 5), the others held in: each set has both splits.
    let first = tmp.path().join("first");
    let second = tmp.path().join("second");
    let (first_corpus, first_in, first_out) = cut_set(&first, "squad-dev", &[0, 2, 3], 0..10);
    let (second_corpus, second_in, second_out) = cut_set(&second, "other", &[12, 20, 41], 10..20);
    assert!(first_in > 0 && first_out > 0 && second_in > 0 && second_out > 0);

    let (_dev, line) = start_with_env(
        &["dev", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"],
        Some(&tmp.path().join("node")),
        Logs::Quiet,
        // MiniLM embeds in batches: the quicker ingest, and the training does not depend on the model.
        &[("ATTEST__EMBEDDER__LOCAL__MODEL", "all-minilm-l6-v2")],
    );
    let (url, grpc) = (
        value_of(&line, "http="),
        format!("http://{}", value_of(&line, "grpc=")),
    );
    for (name, corpus) in [("first", &first_corpus), ("second", &second_corpus)] {
        let (status, body) = call(
            "POST",
            &format!("{url}/v1/collections"),
            None,
            Some(&json!({"name": name, "shards": 1})),
        );
        assert_eq!(status, 201, "{body}");
        for batch in corpus.chunks(50) {
            let (status, body) = call(
                "POST",
                &format!("{url}/v1/collections/{name}/documents"),
                None,
                Some(&json!({ "documents": batch })),
            );
            assert_eq!(status, 200, "{body}");
            assert_eq!(body["accepted"], batch.len(), "{body}");
        }
    }

    let out = tmp.path().join("reranker.json");
    let sets = [(first.as_path(), "first"), (second.as_path(), "second")];
    let report = train(&sets, &grpc, &out);
    assert_eq!(report["train_queries"], first_in + second_in, "{report}");
    let by_set = report["heldout_by_set"]
        .as_object()
        .expect("one report per set");
    let names: BTreeSet<&str> = by_set.keys().map(String::as_str).collect();
    assert_eq!(names, BTreeSet::from(["first", "second"]));
    // The first set's report is the model file's `heldout`, judged once.
    assert_eq!(by_set["first"], report["heldout"]);
    assert_eq!(by_set["first"]["queries"], first_out);
    assert_eq!(by_set["second"]["queries"], second_out);
    for set in ["first", "second"] {
        let r = &by_set[set];
        assert_eq!(r["top_learned_unanswerable"]["queries"], 10, "{set}: {r}");
        let ndcg = r["learned"]["ndcg_at_10"].as_f64().unwrap();
        assert!(ndcg > 0.0 && ndcg <= 1.0, "{set}: {r}");
    }
    assert_eq!(
        report["previous_ndcg_at_10"],
        json!([]),
        "no model at --out before"
    );

    let written: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(written["heldout_by_set"], report["heldout_by_set"]);
    assert_eq!(written["train_queries"], report["train_queries"]);

    // Trained again into the same file: the model it held is judged on this run's candidates, beside the new one.
    let again = train(&sets, &grpc, &out);
    let previous = again["previous_ndcg_at_10"].as_array().unwrap();
    assert_eq!(previous.len(), 2, "{again}");
    for entry in previous {
        let (set, ndcg) = (entry[0].as_str().unwrap(), entry[1].as_f64().unwrap());
        let before = by_set[set]["learned"]["ndcg_at_10"].as_f64().unwrap();
        assert!(
            (ndcg - before).abs() < 1e-9,
            "{set}: the previous model gave {before} when it was trained, {ndcg} now"
        );
    }
}
