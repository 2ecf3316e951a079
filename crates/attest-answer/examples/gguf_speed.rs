//! Measures the local GGUF model on this machine: load time, prompt tokens/s and generated tokens/s.
//!
//!     cargo run -p attest-answer --example gguf_speed [-- PROMPT_WORDS MAX_TOKENS [quantized]]
//!
//! The prompt is the generator's own shape (system prompt, three passages, a question), padded with passage
//! text to about PROMPT_WORDS words (default 250).

use std::time::Instant;

use attest_answer::generate::SYSTEM_PROMPT;
use attest_models::gguf::{default_llm_path, LocalLlm};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let words: usize = args.next().map_or(Ok(250), |a| a.parse())?;
    let max_tokens: usize = args.next().map_or(Ok(128), |a| a.parse())?;

    let path = default_llm_path();
    let started = Instant::now();
    // `quantized` as third argument: keep the file's Q4_1 matrices (candle's scalar kernels here).
    let dequantize = args.next().as_deref() != Some("quantized");
    let model = LocalLlm::load(&path, dequantize)?;
    println!(
        "load: {:.0} ms ({})",
        started.elapsed().as_secs_f64() * 1e3,
        path.display()
    );

    let sentence =
        "The barn owl hunts at night over open fields and nests in old barns and church towers. ";
    let per = sentence.split_whitespace().count();
    let passage = sentence.repeat((words / 3 / per).max(1));
    let user = format!(
        "Passages:\n\n[1] Barn owl — {passage}\n\n[2] Barn owl — {passage}\n\n[3] Barn owl — {passage}\n\n\
         Question: When does the barn owl hunt?"
    );
    for run in 0..3 {
        let c = model.chat(SYSTEM_PROMPT, &user, max_tokens, &Default::default())?;
        let prompt_s = c.prompt_time.as_secs_f64();
        let gen_s = c.generate_time.as_secs_f64();
        println!(
            "run {run}: prompt {} tokens in {:.0} ms = {:.0} tok/s; generated {} tokens ({} steps) in {:.0} ms = {:.1} tok/s ({:?})",
            c.prompt_tokens,
            prompt_s * 1e3,
            c.prompt_tokens as f64 / prompt_s,
            c.generated_tokens,
            c.decode_steps,
            gen_s * 1e3,
            // One forward pass per step (the first new token comes out of the prompt pass).
            c.decode_steps as f64 / gen_s.max(1e-9),
            c.stop
        );
        if run == 0 {
            println!("reply: {:?}", c.text);
        }
    }
    Ok(())
}
