//! The lab's command line: `attest-lab eval`, `attest-lab bench`, `attest-lab train`, `attest-lab rules`,
//! `attest-lab replay`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "attest-lab",
    version,
    about = "Attest's lab: the answer-quality gate, the index benchmarks and model training"
)]
pub struct Lab {
    /// Log level filter (e.g. info, debug, attest_index=debug); ONNX Runtime (`ort`) and tantivy log at warn unless
    /// named ("info,ort=info").
    #[arg(long, global = true, env = "ATTEST_LOG", default_value = "info")]
    pub log_level: String,
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(Subcommand)]
pub enum LabCommand {
    /// The quality gate: ingests a BEIR-layout data set into a fresh in-process cluster and measures retrieval
    /// per lane, answers (hallucination, coverage, accuracy, citation validity), stage latencies.
    Eval(EvalArgs),
    /// Measures the dense index at scale: build time, disk, serving memory, latency, QPS and recall against
    /// exact search, on synthetic clustered vectors or Fashion-MNIST; or fits a cost model to earlier runs.
    Bench(BenchArgs),
    /// Trains a local model of the answer tier from public data.
    #[command(subcommand)]
    Train(TrainCommand),
    /// Asks the reader's rules (no model, no cluster) of a data set's gold sentences and near misses' neighbouring
    /// facts: what each rule costs in coverage and what it catches.
    Rules(crate::rules::RulesArgs),
    /// Tries the coverage gate's bars and the readers' combination on what a run of `eval --per-question` read
    /// (no model, no cluster): hallucination and coverage per setting, in seconds.
    Replay(crate::replay::ReplayArgs),
}

#[derive(Subcommand)]
pub enum TrainCommand {
    /// The claim verifier, on HaluEval QA (train split by question; AUROC on the held-out split).
    Verifier {
        /// The halueval-qa directory (or its items.jsonl).
        #[arg(long, default_value = "data/halueval-qa")]
        data: PathBuf,
        /// Where to write the model.
        #[arg(long, default_value = "crates/attest-models/models/verifier.json")]
        out: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// The reader verifier's calibration (its support head with the lexical features), on the held-in items of
    /// claim-verification sets; AUROC and balanced accuracy at 0.5 on each set's held-out items.
    Support {
        /// A HaluEval-QA or claim/evidence (VitaminC) set, its directory or items.jsonl (repeatable).
        #[arg(long, default_values = ["data/halueval-qa", "data/vitaminc-train"])]
        data: Vec<PathBuf>,
        /// Fit on every N-th held-in item of each set (the reader reads each one).
        #[arg(long, default_value_t = 3)]
        every: usize,
        /// Where to write the calibration.
        #[arg(
            long,
            default_value = "crates/attest-models/models/reader/support.json"
        )]
        out: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// The candidate reranker, on squad-dev (and other sets with its paragraph ids) with candidates from a
    /// running router (train split by article; nDCG@10 / MRR@10 / recall@10 and AUROC on each held-out split).
    Reranker {
        /// The data directories (their queries.jsonl), trained on together; the first is the model file's
        /// `heldout` report.
        #[arg(long, default_values = ["data/squad-dev"])]
        data: Vec<PathBuf>,
        /// The router's gRPC endpoint (`attest dev --grpc`).
        #[arg(long, default_value = "http://127.0.0.1:7711")]
        router: String,
        /// The collection holding each `--data` set's corpus, in the same order.
        #[arg(long, default_values = ["squad"])]
        collection: Vec<String>,
        /// Where to write the model.
        #[arg(long, default_value = "crates/attest-models/models/reranker.json")]
        out: PathBuf,
        /// At most this many queries per group (train, held-out, unanswerable), evenly spread.
        #[arg(long)]
        limit: Option<usize>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Clone)]
pub struct EvalArgs {
    /// BEIR-layout data set: corpus.jsonl, queries.jsonl (with `answerable`, `answers`), qrels/test.tsv (or each
    /// query's `gold_doc`).
    #[arg(long)]
    pub data: PathBuf,
    /// Write the JSON report here (and the risk–coverage curve beside it as a PNG).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write one JSON line per question asked here: id, question, domain, kind, answerable, status, reason,
    /// how it scored, answer, confidence, citations, gold answers and document, the abstention's suggestions.
    #[arg(long, value_name = "FILE")]
    pub per_question: Option<PathBuf>,
    /// A previous report: print the differences; exit non-zero when accuracy drops by more than 5 points or
    /// the hallucination rate rises by more than 1 point.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Sweep the abstention threshold and store the operating point (most coverage within
    /// --hallucination-budget) as the collection's thresholds in meta (this run's; see --apply-to).
    #[arg(long)]
    pub sweep: bool,
    #[arg(long, default_value_t = 0.02)]
    pub hallucination_budget: f64,
    /// With --sweep: also store the thresholds in a running cluster, through this router
    /// (`PUT /v1/collections/{collection}/thresholds`), e.g. http://127.0.0.1:7700.
    #[arg(long, requires = "sweep")]
    pub apply_to: Option<String>,
    /// Claim-verification items (HaluEval QA, or claim/evidence like VitaminC; repeatable): also report the
    /// verifier's AUROC and balanced accuracy on each set's held-out split.
    #[arg(long)]
    pub verifier_data: Vec<PathBuf>,
    /// Ask only the questions of held-out articles (`…-aNNNN-…` with NNNN % 5 == 0: never trained on).
    #[arg(long, conflicts_with = "heldin")]
    pub heldout: bool,
    /// Ask only the questions of held-in articles (the complement of `--heldout`): where thresholds and gate
    /// modes are chosen, so that the held-out articles report them untuned.
    #[arg(long)]
    pub heldin: bool,
    /// Ask only the questions of the tuning slice: held-in articles NNNN % 5 == 1, which readers trained with
    /// `scripts/reader/train.py --tuning-slice` never saw (bars chosen there are chosen on unseen text).
    #[arg(long, conflicts_with_all = ["heldin", "heldout"])]
    pub tuning_slice: bool,
    /// Also ask up to N answerable questions against their gold paragraph with the answer sentence removed
    /// (unanswerable with the topic present), in a second collection; reported apart.
    #[arg(long)]
    pub adversarial: Option<usize>,
    /// Keep every N-th question (a fixed sample).
    #[arg(long, default_value_t = 1)]
    pub every: usize,
    /// Measure retrieval per lane only: no question is asked (comparing embedders or fusion settings).
    #[arg(long, conflicts_with_all = ["adversarial", "sweep", "per_question", "baseline"])]
    pub retrieval_only: bool,
    /// Also measure `hybrid_rerank_reader`: the reranked hybrid lane's best N candidates reordered by the
    /// answer tier's readers, as `answer.rerank.readers` with depth N does (its weight and sentences unless
    /// the two flags below are given).
    #[arg(long, value_name = "N")]
    pub reader_rerank: Option<usize>,
    /// The readers' share of a reordered candidate's score (1: the readers alone).
    #[arg(long, requires = "reader_rerank")]
    pub reader_rerank_weight: Option<f64>,
    /// Sentences read per reordered candidate, those covering most of the question first.
    #[arg(long, requires = "reader_rerank")]
    pub reader_rerank_sentences: Option<usize>,
    /// At most this many questions (after --every).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Collection name inside the scratch cluster.
    #[arg(long, default_value = "eval")]
    pub collection: String,
    #[arg(long, default_value_t = 2)]
    pub shards: usize,
    /// Keep the cluster's data here instead of a temporary directory.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Directory of the configured local embedding model (as `attest dev --model-dir`).
    #[arg(long)]
    pub model_dir: Option<PathBuf>,
}

#[derive(Args, Clone)]
pub struct BenchArgs {
    /// Synthetic vectors to index (a Gaussian mixture, generated and streamed in batches).
    #[arg(long, default_value_t = 1_000_000)]
    pub vectors: usize,
    #[arg(long, default_value_t = 384)]
    pub dim: usize,
    /// Query sample (drawn from the same mixture): latency percentiles, QPS and recall are over these.
    #[arg(long, default_value_t = 1000)]
    pub queries: usize,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Inverted lists (default: √n rounded up to a power of two).
    #[arg(long)]
    pub nlist: Option<u32>,
    /// PQ sub-quantizers (default: the engine's, 96).
    #[arg(long)]
    pub m: Option<u32>,
    /// Lists probed per query (default: the engine's, 32).
    #[arg(long)]
    pub nprobe: Option<u32>,
    /// PQ candidates re-scored exactly per requested hit (default: the engine's, 4).
    #[arg(long)]
    pub overfetch: Option<usize>,
    /// Also measure recall and QPS at each of these nprobe values (the recall/QPS curve).
    #[arg(long, value_delimiter = ',')]
    pub sweep: Vec<u32>,
    /// Repeat the --sweep at each of these over-fetch factors.
    #[arg(long, value_delimiter = ',')]
    pub sweep_overfetch: Vec<usize>,
    /// Repeat the --sweep re-scoring from the SQ8 copy of the vectors (as a sealed segment does) at each of these
    /// over-fetch factors: the PQ list is re-scored from the copy, its best 2 × k from the full vectors.
    #[arg(long, value_delimiter = ',')]
    pub sweep_compact: Vec<usize>,
    /// Mixture components (default: one per 500 vectors).
    #[arg(long)]
    pub clusters: Option<usize>,
    /// Norm of each point's noise against its unit centre.
    #[arg(long, default_value_t = 0.6)]
    pub spread: f32,
    /// Vectors generated and added per batch (bounds the raw vectors held in memory).
    #[arg(long, default_value_t = 100_000)]
    pub batch: usize,
    /// Single-query exact scans timed for `exact_p50_ms`.
    #[arg(long, default_value_t = 20)]
    pub exact_queries: usize,
    /// Where the index and vector file are built (default: a temporary directory, removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Fashion-MNIST (Debian `dataset-fashion-mnist`) instead of synthetic vectors: 60k train images indexed,
    /// test images as queries, recall/QPS over nprobe (cosine on L2-normalised pixels).
    #[arg(long)]
    pub fashion_mnist: bool,
    #[arg(long, default_value = "/usr/share/datasets/fashion-mnist")]
    pub fashion_mnist_dir: PathBuf,
    /// Internal: only the serving measurements, on what a run already built in --dir (a run starts itself
    /// again with this flag, so that serving memory is measured in a fresh process).
    #[arg(long, hide = true)]
    pub serve_only: bool,
    /// Fit the cost model to these earlier `--json` reports (no run): projections to --project-n vectors,
    /// the shard count that needs, and plots (latency against n, recall against QPS) into --plots.
    #[arg(long, num_args = 1..)]
    pub fit: Vec<PathBuf>,
    #[arg(long, default_value_t = 100_000_000)]
    pub project_n: u64,
    /// Directory for the PNG plots of --fit.
    #[arg(long)]
    pub plots: Option<PathBuf>,
    #[arg(long)]
    pub config: Option<PathBuf>,
}
