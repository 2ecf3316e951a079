//! The names a question is about: a sentence whose reading context (its passage's title, the sentence before it
//! and itself, all the reader sees) names none of them is not read. The reader matches answer types confidently
//! and, with the answer's sentence gone, answered "What astronomer worked for Kublai?" from a sentence about
//! Song dynasty astronomers (issue 41, held-in squad-dev articles): nothing it was shown named Kublai's court. One name in
//! common is enough, so a question that names a thing two ways ("Polish", "Warsaw") still reads a sentence that
//! uses either.

use std::collections::HashSet;

use crate::text;

/// The question's names, stemmed lower-case words; empty when it names nothing (then every sentence is read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuestionNames(HashSet<String>);

impl QuestionNames {
    /// The capitalised words of `question` ([`text::capitalised_tokens`]: not a sentence's first, which is
    /// capitalised whatever it is), each as [`text::words`] spells it ("Tesla's" → "tesla", "Who-related" →
    /// "who", "related").
    pub fn of_question(question: &str) -> Self {
        let names = text::capitalised_tokens(question)
            .flat_map(text::words)
            .filter(|w| !text::is_function_word(w))
            .map(|w| text::stem(&w))
            .collect();
        QuestionNames(names)
    }

    /// Whether `part` (of what the reader reads with a sentence: its context, or the sentence) names one of
    /// the question's names, or the question names nothing.
    pub fn any_named_in(&self, part: &str) -> bool {
        self.0.is_empty()
            || text::words(part)
                .iter()
                .any(|w| self.0.contains(&text::stem(w)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentence_naming_none_of_the_question_is_not_read() {
        let q = QuestionNames::of_question("Who governed Egypt in 2006?");
        assert!(!q.any_named_in("Iran. During the 2006 conflict, Mahmoud Ahmadinejad opposed it."));
        let q = QuestionNames::of_question("What astronomer worked for Kublai?");
        assert!(!q.any_named_in(
            "Yuan calendar. The calendar may have been influenced by the astronomer Shen Kuo."
        ));
        assert!(q.any_named_in("Yuan dynasty. Guo Shoujing served under Kublai Khan."));
    }

    #[test]
    fn one_name_in_common_is_enough_and_spellings_match() {
        let q = QuestionNames::of_question("What is the Saxon Garden in Polish?");
        assert!(q.any_named_in("Warsaw. The Saxon Garden was formerly a royal garden."));
        let q = QuestionNames::of_question("What modern-day country was Tesla's birthplace?");
        assert!(q.any_named_in("Nikola Tesla. He was born in the village of Smiljan."));
        assert!(!q.any_named_in("Thomas Edison. He was born in Ohio."));
    }

    #[test]
    fn a_question_without_names_reads_everything() {
        let q = QuestionNames::of_question("What did the old man say to the river?");
        assert_eq!(q, QuestionNames::default());
        assert!(q.any_named_in("Anything at all."));
        // The first word is capitalised whatever it is; a stop word capitalised mid-question is no name.
        assert_eq!(
            QuestionNames::of_question("Where does The river end?"),
            QuestionNames::default()
        );
    }
}
