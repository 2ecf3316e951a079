//! How every role's configuration section reports a value that cannot be right: one collector of problems, each
//! naming the key as it is written in the YAML (`router.max_k`), so `attest config check` and start-up refuse a
//! config with every mistake listed, not the first one found at run time.

/// A finite number in `0..=1` (the rule of thresholds, ratios and factors everywhere).
pub fn in_unit_interval(value: f64) -> bool {
    value.is_finite() && (0.0..=1.0).contains(&value)
}

/// The problems found in one configuration, each `section.key: what is wrong (got VALUE)`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ConfigProblems {
    section: String,
    problems: Vec<String>,
}

impl ConfigProblems {
    /// Problems of the keys under `section` (e.g. `router`, `answer.reader`).
    pub fn new(section: impl Into<String>) -> Self {
        ConfigProblems {
            section: section.into(),
            problems: Vec::new(),
        }
    }

    /// Records a problem with `key` (relative to the section).
    pub fn add(&mut self, key: &str, problem: impl std::fmt::Display) {
        let path = if self.section.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.section)
        };
        self.problems.push(format!("{path}: {problem}"));
    }

    /// Requires `value > 0` (counts, sizes, timeouts).
    pub fn positive<T: PartialOrd + Default + std::fmt::Display>(&mut self, key: &str, value: T) {
        if value <= T::default() {
            self.add(key, format!("must be greater than 0 (got {value})"));
        }
    }

    /// Requires a finite `value` in `0..=1` (thresholds, ratios, factors).
    pub fn unit_interval(&mut self, key: &str, value: f64) {
        if !in_unit_interval(value) {
            self.add(key, format!("must be between 0 and 1 (got {value})"));
        }
    }

    /// Requires `value <= limit`, where `limit` is named by `what` (another key, or a built-in limit).
    pub fn at_most<T: PartialOrd + std::fmt::Display>(
        &mut self,
        key: &str,
        value: T,
        limit: T,
        what: &str,
    ) {
        if value > limit {
            self.add(
                key,
                format!("must be at most {what} ({limit}; got {value})"),
            );
        }
    }

    /// Takes in the problems of a nested section.
    pub fn extend(&mut self, other: ConfigProblems) {
        self.problems.extend(other.problems);
    }

    pub fn is_empty(&self) -> bool {
        self.problems.is_empty()
    }

    pub fn into_vec(self) -> Vec<String> {
        self.problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_names_the_key_and_the_value() {
        let mut p = ConfigProblems::new("answer");
        p.positive("passages", 0usize);
        p.positive("timeout_ms", 5u64);
        p.unit_interval("bail_threshold", 1.5);
        p.unit_interval("ground_threshold", f64::NAN);
        p.unit_interval("noise_floor", 0.0);
        p.at_most("nprobe", 64u32, 32, "nlist");
        assert_eq!(
            p.into_vec(),
            vec![
                "answer.passages: must be greater than 0 (got 0)",
                "answer.bail_threshold: must be between 0 and 1 (got 1.5)",
                "answer.ground_threshold: must be between 0 and 1 (got NaN)",
                "answer.nprobe: must be at most nlist (32; got 64)",
            ]
        );
    }
}
