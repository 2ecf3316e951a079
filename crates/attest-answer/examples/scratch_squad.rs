use attest_answer::footnotes::{Footnotes, Passage};
use attest_answer::generate::{Generator, SYSTEM_PROMPT};
use attest_answer::local_llm::{GgufConfig, GgufGenerator, LocalLlm, CitationRule};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&args[1]).unwrap()).unwrap();
    let passages: Vec<Passage> = v["hits"].as_array().unwrap().iter().map(|h| Passage { chunk_id: h["chunk_id"].as_str().unwrap().into(), doc_id: h["doc_id"].as_str().unwrap().into(), title: h["title"].as_str().unwrap().into(), text: h["text"].as_str().unwrap().into(), score: 1.0 }).collect();
    let f = Footnotes::mint(passages);
    let cfg = GgufConfig::default();
    let g = GgufGenerator::new(cfg.clone());
    let m = LocalLlm::shared(&cfg.path, true).unwrap();
    let user0 = g.user_message(&m, &args[2], &f).unwrap();
    let base = user0.rsplit_once("\n\n").unwrap().0.to_string();
    for hint in ["", "Answer in one short sentence.", "Answer the question in one short sentence, using the passages.", "Answer the question in one short sentence."] {
    let user = if hint.is_empty() { base.clone() } else { format!("{base}\n\n{hint}") };
    let rule = CitationRule { passages: 3, exempt_prefix: "I cannot".into() };
    let c = m.chat(SYSTEM_PROMPT, &user, 128, Some(&rule)).unwrap();
    println!("{hint:?} => {:?} {:?} {}", c.text, c.stop, c.generated_tokens);
    }
}
