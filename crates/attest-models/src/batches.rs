//! Running a model over many inputs on a CPU: inputs of similar length share a batch (the model pads a batch to
//! its longest input, so little compute goes to padding), the batches are spread over threads (a forward pass
//! uses one core; thread t takes batches t, t + threads, …, which are as long as each other since batches go by
//! length), and the results come back in input order. The local embedder and the answer tier's reader run so.

/// `run` over the inputs whose lengths are `lengths`, `batch` inputs per call (given as input indices), over
/// `threads` threads (at least 1); returns one result per input, in input order. The first error is returned;
/// `panicked` makes the error for a thread that panicked.
pub fn by_length<R, E>(
    lengths: &[usize],
    batch: usize,
    threads: usize,
    run: impl Fn(&[usize]) -> Result<Vec<R>, E> + Sync,
    panicked: impl Fn() -> E,
) -> Result<Vec<R>, E>
where
    R: Send,
    E: Send,
{
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| lengths[i]);
    let batches: Vec<&[usize]> = order.chunks(batch.max(1)).collect();
    let threads = threads.min(batches.len()).max(1);
    let part = |t: usize| -> Result<Vec<(usize, R)>, E> {
        let mut done = Vec::new();
        for b in batches.iter().skip(t).step_by(threads) {
            done.extend(b.iter().copied().zip(run(b)?));
        }
        Ok(done)
    };
    let parts: Vec<Result<Vec<(usize, R)>, E>> = if threads == 1 {
        vec![part(0)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let part = &part;
                    s.spawn(move || part(t))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(panicked())))
                .collect()
        })
    };
    let mut out: Vec<Option<R>> = (0..lengths.len()).map(|_| None).collect();
    for p in parts {
        for (i, r) in p? {
            out[i] = Some(r);
        }
    }
    Ok(out
        .into_iter()
        .map(|r| r.expect("every input is in one batch"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_input_order_from_length_sorted_batches_on_every_thread() {
        let lengths = [5, 1, 9, 3, 7, 2, 8];
        for threads in [1, 2, 3, 8] {
            let seen = std::sync::Mutex::new(Vec::new());
            let out = by_length(
                &lengths,
                2,
                threads,
                |b: &[usize]| {
                    seen.lock()
                        .unwrap()
                        .push(b.iter().map(|&i| lengths[i]).collect::<Vec<_>>());
                    Ok::<_, String>(b.iter().map(|&i| lengths[i] * 10).collect())
                },
                || "panicked".to_string(),
            )
            .unwrap();
            assert_eq!(out, lengths.map(|l| l * 10));
            let mut batches = seen.into_inner().unwrap();
            batches.sort();
            assert_eq!(batches, [vec![1, 2], vec![3, 5], vec![7, 8], vec![9]]);
        }
        let failed = by_length(
            &lengths,
            3,
            2,
            |_| Err::<Vec<u8>, _>("no".to_string()),
            || "p".into(),
        );
        assert_eq!(failed.unwrap_err(), "no");
    }
}
