//! A logistic model as the answer tier runs it: standardised inputs, one weight each, a bias, and the sign each
//! weight was held to when it was fitted (by `attest-lab train`, whose fitting and metrics live there). Its
//! parameters are a committed JSON file.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogisticModel {
    pub means: Vec<f64>,
    pub scales: Vec<f64>,
    pub weights: Vec<f64>,
    pub bias: f64,
}

/// The sign a weight must keep: evidence features may only push one way, so that a data set's shortcuts cannot
/// teach the model that, say, an invented name makes a claim more likely true.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sign {
    Positive,
    Negative,
    Free,
}

pub fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

impl LogisticModel {
    /// Probability of the positive class.
    pub fn predict(&self, row: &[f64]) -> f64 {
        let z = self.bias
            + row
                .iter()
                .enumerate()
                .map(|(j, v)| (v - self.means[j]) / self.scales[j] * self.weights[j])
                .sum::<f64>();
        sigmoid(z)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_standardises_each_input_before_weighing_it() {
        let m = LogisticModel {
            means: vec![10.0, 0.0],
            scales: vec![2.0, 1.0],
            weights: vec![1.0, -3.0],
            bias: 0.5,
        };
        // (14 - 10) / 2 * 1 + 0 * -3 + 0.5 = 2.5
        assert!((m.predict(&[14.0, 0.0]) - sigmoid(2.5)).abs() < 1e-12);
        assert!(
            m.predict(&[10.0, 1.0]) < 0.5,
            "the negative weight pulls it down"
        );
    }
}
