//! Fitting the logistic models the answer tier runs ([`LogisticModel`]): standardised inputs, L2 regularisation,
//! full-batch gradient descent with each weight held to its [`Sign`]; deterministic, and small enough to read in
//! one sitting. With the metrics the training reports (AUROC, balanced accuracy).

use attest_models::logistic::{sigmoid, LogisticModel, Sign};

/// Training settings.
#[derive(Debug, Clone, Copy)]
pub struct TrainSettings {
    pub epochs: usize,
    pub learning_rate: f64,
    pub l2: f64,
}

impl Default for TrainSettings {
    fn default() -> Self {
        TrainSettings {
            epochs: 2000,
            learning_rate: 0.5,
            l2: 1e-3,
        }
    }
}

/// Fits `labels` (true = positive) from `rows`.
///
/// # Panics
/// If `rows` is empty or rows differ in length.
pub fn fit(
    rows: &[Vec<f64>],
    labels: &[bool],
    signs: &[Sign],
    settings: TrainSettings,
) -> LogisticModel {
    fit_weighted(rows, labels, &vec![1.0; rows.len()], signs, settings)
}

/// Fits `labels` from `rows`, each row counting `weights[i]` in the loss (the inputs are standardised over
/// the rows unweighted).
///
/// # Panics
/// If `rows` is empty, rows differ in length, or the weights do not sum to a positive number.
pub fn fit_weighted(
    rows: &[Vec<f64>],
    labels: &[bool],
    weights_of_rows: &[f64],
    signs: &[Sign],
    settings: TrainSettings,
) -> LogisticModel {
    assert!(!rows.is_empty() && rows.len() == labels.len() && rows.len() == weights_of_rows.len());
    let total: f64 = weights_of_rows.iter().sum();
    assert!(total > 0.0, "the weights sum to a positive number");
    let dim = rows[0].len();
    assert_eq!(signs.len(), dim, "one sign per feature");
    let n = rows.len() as f64;
    let means: Vec<f64> = (0..dim)
        .map(|j| rows.iter().map(|r| r[j]).sum::<f64>() / n)
        .collect();
    let scales: Vec<f64> = (0..dim)
        .map(|j| {
            let var = rows.iter().map(|r| (r[j] - means[j]).powi(2)).sum::<f64>() / n;
            if var > 1e-12 {
                var.sqrt()
            } else {
                1.0
            }
        })
        .collect();
    let x: Vec<Vec<f64>> = rows
        .iter()
        .map(|r| (0..dim).map(|j| (r[j] - means[j]) / scales[j]).collect())
        .collect();
    let mut weights = vec![0.0; dim];
    let mut bias = 0.0;
    for _ in 0..settings.epochs {
        let mut grad_w = vec![0.0; dim];
        let mut grad_b = 0.0;
        for ((xi, &yi), &wi) in x.iter().zip(labels).zip(weights_of_rows) {
            let z = bias + xi.iter().zip(&weights).map(|(a, w)| a * w).sum::<f64>();
            let err = (sigmoid(z) - f64::from(u8::from(yi))) * wi;
            grad_b += err;
            for j in 0..dim {
                grad_w[j] += err * xi[j];
            }
        }
        for j in 0..dim {
            weights[j] -= settings.learning_rate * (grad_w[j] / total + settings.l2 * weights[j]);
            // Projected gradient descent: the constrained problem stays convex.
            weights[j] = match signs[j] {
                Sign::Positive => weights[j].max(0.0),
                Sign::Negative => weights[j].min(0.0),
                Sign::Free => weights[j],
            };
        }
        bias -= settings.learning_rate * grad_b / total;
    }
    LogisticModel {
        means,
        scales,
        weights,
        bias,
    }
}

/// Area under the ROC curve: the chance that a random positive scores above a random negative (ties count
/// half).
pub fn auroc(scores: &[f64], labels: &[bool]) -> f64 {
    let mut pairs: Vec<(f64, bool)> = scores.iter().copied().zip(labels.iter().copied()).collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut rank_sum, mut positives) = (0.0, 0usize);
    let mut i = 0;
    while i < pairs.len() {
        let mut j = i;
        while j < pairs.len() && pairs[j].0 == pairs[i].0 {
            j += 1;
        }
        let mid_rank = (i + j + 1) as f64 / 2.0; // ranks are 1-based
        for p in &pairs[i..j] {
            if p.1 {
                rank_sum += mid_rank;
                positives += 1;
            }
        }
        i = j;
    }
    let negatives = pairs.len() - positives;
    if positives == 0 || negatives == 0 {
        return 0.5;
    }
    (rank_sum - (positives * (positives + 1)) as f64 / 2.0) / (positives * negatives) as f64
}

/// Mean of the true-positive and true-negative rates at `threshold`.
pub fn balanced_accuracy(scores: &[f64], labels: &[bool], threshold: f64) -> f64 {
    let (mut tp, mut p, mut tn, mut n) = (0, 0, 0, 0);
    for (&s, &l) in scores.iter().zip(labels) {
        if l {
            p += 1;
            tp += usize::from(s >= threshold);
        } else {
            n += 1;
            tn += usize::from(s < threshold);
        }
    }
    let rate = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    (rate(tp, p) + rate(tn, n)) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_a_separable_rule() {
        let rows: Vec<Vec<f64>> = (0..200)
            .map(|i| vec![(i % 20) as f64, ((i * 7) % 13) as f64])
            .collect();
        let labels: Vec<bool> = rows.iter().map(|r| r[0] >= 10.0).collect();
        let m = fit(&rows, &labels, &[Sign::Free; 2], TrainSettings::default());
        let scores: Vec<f64> = rows.iter().map(|r| m.predict(r)).collect();
        assert!(auroc(&scores, &labels) > 0.99);
        assert!(balanced_accuracy(&scores, &labels, 0.5) > 0.95);
        assert!(m.weights[0] > 0.0 && m.weights[0].abs() > 5.0 * m.weights[1].abs());
    }

    #[test]
    fn sign_constraints_hold() {
        let rows: Vec<Vec<f64>> = (0..100).map(|i| vec![(i % 10) as f64]).collect();
        let labels: Vec<bool> = rows.iter().map(|r| r[0] < 5.0).collect();
        let m = fit(&rows, &labels, &[Sign::Positive], TrainSettings::default());
        assert_eq!(
            m.weights[0], 0.0,
            "the data pull it negative; the constraint keeps it at 0"
        );
    }

    #[test]
    fn auroc_reference_values() {
        assert_eq!(
            auroc(&[0.1, 0.2, 0.8, 0.9], &[false, false, true, true]),
            1.0
        );
        assert_eq!(
            auroc(&[0.9, 0.8, 0.2, 0.1], &[false, false, true, true]),
            0.0
        );
        assert_eq!(auroc(&[0.5, 0.5], &[true, false]), 0.5);
        assert_eq!(
            auroc(&[0.1, 0.4, 0.35, 0.8], &[false, false, true, true]),
            0.75
        );
    }
}
