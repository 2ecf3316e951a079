//! The rules that keep a sentence from the reader (issue 68): each says, without a model, that a sentence
//! answers another question than the one asked — another edition, a look-alike subject, another attribute, no
//! quantity for "how many", a value withheld, another condition. [`Reader::read`](super::Reader::read) reads
//! only the sentences no rule refuses; `attest-lab rules` asks the same rules of a data set's gold sentences
//! (what each rule costs) and of its near misses' neighbouring sentences (what each one catches).

use std::borrow::Cow;
use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::ReaderConfig;
use attest_text::compounds::Compounds;
use attest_text::conditions::Conditions;
use attest_text::edition::Editions;
use attest_text::measure::Measure;
use attest_text::quantity::Asked;
use attest_text::question_names::QuestionNames;
use attest_text::subjects::{meets_the_asked, Subjects};
use attest_text::text::fold_diacritics;

/// The rule that refused a sentence, named as its `answer.reader` switch (`edition` has none: always on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The sentence is about another edition of what the question names ("Super Bowl XIX" for "Super Bowl 50").
    Edition,
    /// A "how many / how long" question and a sentence stating no quantity, or none of the kind asked (a price
    /// for a qualifying period).
    Quantities,
    /// The sentence says its value is not given.
    Withheld,
    /// The passage names a look-alike of the question's subject and never the subject.
    SubjectsPassage,
    /// The sentence names a look-alike and not the subject, in a passage naming both.
    SubjectsSentence,
    /// The sentence names something else where no word of the subject is named.
    AnotherSubject,
    /// The sentence (with the one before it) meets the question only in its subject's name.
    AskedWords,
    /// The sentence states another condition than the question's.
    Conditions,
    /// The sentence names a look-alike written in lower case ("bereavement leave" for "sick leave").
    Compounds,
    /// The sentence's context names none of the question's names (`question_names`, off by default).
    QuestionNames,
}

impl Rule {
    pub const ALL: [Rule; 10] = [
        Rule::Edition,
        Rule::Quantities,
        Rule::Withheld,
        Rule::SubjectsPassage,
        Rule::SubjectsSentence,
        Rule::AnotherSubject,
        Rule::AskedWords,
        Rule::Conditions,
        Rule::Compounds,
        Rule::QuestionNames,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Rule::Edition => "edition",
            Rule::Quantities => "quantities",
            Rule::Withheld => "withheld",
            Rule::SubjectsPassage => "subjects (passage)",
            Rule::SubjectsSentence => "subjects (sentence)",
            Rule::AnotherSubject => "another_subject",
            Rule::AskedWords => "asked_words",
            Rule::Conditions => "conditions",
            Rule::Compounds => "compounds",
            Rule::QuestionNames => "question_names",
        }
    }
}

/// What the rules make of one sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No rule refuses it.
    Read,
    /// Only rules the readers may overrule refuse it (`reader.overrulable`, held to `reader.overrule_bar`).
    Overrulable,
    /// This rule refuses it (the first in order not overrulable).
    Refused(Rule),
}

/// The rules of one question, prepared once and asked of each of its candidate sentences.
pub struct SentenceRules<'a> {
    config: &'a ReaderConfig,
    /// The question with its diacritics dropped, as every text the rules read ([`fold_diacritics`]).
    question: Cow<'a, str>,
    editions: Editions,
    asked: Asked,
    /// The kind of quantity asked ([`Measure`]), when the question's words say it.
    measure: Option<Measure>,
    subjects: Subjects,
    asked_words: HashSet<String>,
    /// Whether the passages read write what the question asks in its own words somewhere (see [`Self::seeing`]).
    asked_in_passages: bool,
    /// Whether a passage read names one of the question's compounds (see [`Self::seeing`]).
    compound_in_passages: bool,
    question_words: HashSet<String>,
    conditions: Conditions,
    compounds: Compounds,
    /// "per <unit>" of a rate question ([`attest_text::quantity::rate_unit`]).
    rate_unit: Option<String>,
    names: Option<QuestionNames>,
}

impl<'a> SentenceRules<'a> {
    pub fn new(question: &'a str, config: &'a ReaderConfig) -> Self {
        let question = fold_diacritics(question);
        let subjects = Subjects::of_question(&question);
        let compounds = Compounds::of_question(&question, subjects.name_words());
        // A question naming nothing in capitals may name its subject in lower case ("the sick leave").
        let asked_words = if subjects.is_empty() && config.compounds {
            compounds.asked_of(&question)
        } else {
            subjects.asked_of(&question)
        };
        SentenceRules {
            config,
            editions: Editions::of_question(&question),
            asked: Asked::of_question(&question),
            measure: Measure::of_question(&question),
            rate_unit: attest_text::quantity::rate_unit(&question),
            asked_words,
            asked_in_passages: true,
            compound_in_passages: true,
            question_words: Subjects::question_words(&question),
            conditions: Conditions::of_question(&question, subjects.name_words()),
            compounds,
            subjects,
            names: config
                .question_names
                .then(|| QuestionNames::of_question(&question)),
            question,
        }
    }

    /// The rules of a question read against these passages (title, text). `asked_words` holds a sentence to the
    /// question's words only where some passage writes one of them: the documents then have words for what is
    /// asked, and a sentence without them states something else ("Battery life of the Drift Max is 10 hours"
    /// beside "The Drift Mini takes 2 hours to charge"). Where none does, the question is paraphrased ("When was
    /// the FSO Car Factory founded?" of "… was established in 1951"), and the rule would refuse the answer itself.
    /// Likewise a question naming nothing in capitals takes its lower-case compound for its subject only where a
    /// passage names that compound or a look-alike (its head with another modifier): "the relocation allowance"
    /// of a policy is a kind of thing its documents name, "the author want" of a forum question is a subject and
    /// its verb, which no passage writes.
    pub fn seeing<'p>(mut self, passages: impl IntoIterator<Item = (&'p str, &'p str)>) -> Self {
        let passages: Vec<(Cow<str>, Cow<str>)> = passages
            .into_iter()
            .map(|(title, text)| (fold_diacritics(title), fold_diacritics(text)))
            .collect();
        self.compound_in_passages = passages.iter().any(|(title, text)| {
            self.compounds.kind_named_in(title) || self.compounds.kind_named_in(text)
        });
        if self.subjects.is_empty() && !self.compound_in_passages {
            self.asked_words.clear();
        }
        self.asked_in_passages = self.asked_words.is_empty()
            || passages.iter().any(|(title, text)| {
                meets_the_asked(&self.asked_words, title)
                    || meets_the_asked(&self.asked_words, text)
            });
        self
    }

    /// Whether the whole passage answers another question: it names a look-alike of the subject, never the
    /// subject. Asked once per passage.
    pub fn passage_refusal(&self, title: &str, text: &str) -> Option<Rule> {
        let (title, text) = (fold_diacritics(title), fold_diacritics(text));
        (self.config.subjects && self.subjects.sibling_in(&title, &text).is_some())
            .then_some(Rule::SubjectsPassage)
    }

    /// The first rule refusing sentence `i` of a passage titled `title` (split into `sentences`), in the order
    /// the switches are documented; `None` when the reader may read it. The passage-level rule is not asked.
    pub fn sentence_refusal(&self, title: &str, sentences: &[&str], i: usize) -> Option<Rule> {
        match self.sentence_verdict(title, sentences, i, &[]) {
            Verdict::Refused(rule) => Some(rule),
            Verdict::Read | Verdict::Overrulable => None,
        }
    }

    /// Sentence `i` read, refused only by `overrulable` rules, or refused by another rule (the passage-level one
    /// not asked).
    pub fn sentence_verdict(
        &self,
        title: &str,
        sentences: &[&str],
        i: usize,
        overrulable: &[Rule],
    ) -> Verdict {
        let mut verdict = Verdict::Read;
        self.each_refusal(title, sentences, i, &mut |rule| {
            if overrulable.contains(&rule) {
                verdict = Verdict::Overrulable;
                true
            } else {
                verdict = Verdict::Refused(rule);
                false
            }
        });
        verdict
    }

    /// Every rule refusing sentence `i`, the passage-level one included (`attest-lab rules`: what each rule
    /// would cost or catch on its own, not only where it comes first).
    pub fn all_refusals(&self, title: &str, text: &str, sentences: &[&str], i: usize) -> Vec<Rule> {
        let mut all: Vec<Rule> = self.passage_refusal(title, text).into_iter().collect();
        self.each_refusal(title, sentences, i, &mut |rule| {
            all.push(rule);
            true
        });
        all
    }

    /// Calls `refused` with each sentence-level rule refusing sentence `i`, in order, while it returns true.
    fn each_refusal(
        &self,
        title: &str,
        sentences: &[&str],
        i: usize,
        refused: &mut dyn FnMut(Rule) -> bool,
    ) {
        let title = &*fold_diacritics(title);
        let sentence = &*fold_diacritics(sentences[i]);
        let before = &*fold_diacritics(i.checked_sub(1).map_or("", |j| sentences[j]));
        let c = self.config;
        let checks: [(Rule, &dyn Fn() -> bool); 9] = [
            (Rule::Edition, &|| self.editions.names_another(sentence)),
            (Rule::Quantities, &|| {
                c.quantities
                    && (!self.asked.answerable_by(&self.question, sentence)
                        || self.rate_unit.as_ref().is_some_and(|unit| {
                            !attest_text::quantity::names_the_unit(sentence, unit)
                        })
                        || self.measure.is_some_and(|kind| !kind.stated_in(sentence)))
            }),
            (Rule::Withheld, &|| {
                c.withheld && attest_text::withheld::withholds(&self.question, sentence)
            }),
            // Meeting notes on three projects name both: "Project Robin gets €120,000" read for Project Plover.
            (Rule::SubjectsSentence, &|| {
                c.subjects && self.subjects.sibling_in(title, sentence).is_some()
            }),
            (Rule::AnotherSubject, &|| {
                c.subjects
                    && c.another_subject
                    && self
                        .subjects
                        .another_in_place(&self.question_words, title, before, sentence)
            }),
            // Not the title: a title names the subject and a topic ("Returns API v1: endpoints and limits"), and
            // would let every sentence under it meet "limit". The sentence before only where this one does not
            // name the subject and so leans on it ("It escalates after …"): a sentence naming its subject says
            // all it says of it ("Request bodies sent to the Labels API v3 …" after a sentence on its limits),
            // unless it answers the one before.
            (Rule::AskedWords, &|| {
                // An FAQ's answer ("A: The Halo Plus is rated for 25 kg.") is read with its question.
                let answers_the_one_before = sentence.starts_with("A:");
                let names_the_subject = if self.subjects.is_empty() {
                    self.compounds.named_in(sentence)
                } else {
                    self.subjects.any_word_in(sentence)
                };
                let context = if names_the_subject && !answers_the_one_before {
                    sentence.to_string()
                } else {
                    format!("{before} {sentence}")
                };
                c.subjects
                    && c.asked_words
                    && self.asked_in_passages
                    && !meets_the_asked(&self.asked_words, &context)
            }),
            (Rule::Conditions, &|| {
                c.conditions && self.conditions.contradicted_by(sentence)
            }),
            (Rule::Compounds, &|| {
                // Another compound where the question's stands after "for", "of" or "to" (whatever else the
                // question names) or, in place of the subject, only where the compound is the subject (the
                // question names nothing); either only where a passage names it (a thing of these documents).
                c.compounds
                    && (self.compounds.another_in(sentence)
                        || self.compound_in_passages && self.compounds.another_of_what(sentence)
                        || self.subjects.is_empty()
                            && self.compound_in_passages
                            && self.compounds.another_in_place(sentence))
            }),
            (Rule::QuestionNames, &|| {
                self.names.as_ref().is_some_and(|names| {
                    let context = attest_models::reader::input::answer_context(title, sentences, i);
                    !names.any_named_in(&fold_diacritics(&context)) && !names.any_named_in(sentence)
                })
            }),
        ];
        for (rule, check) in checks {
            if check() && !refused(rule) {
                return;
            }
        }
    }

    /// The first rule refusing sentence `i`, the passage-level one included.
    pub fn refusal(&self, title: &str, text: &str, sentences: &[&str], i: usize) -> Option<Rule> {
        self.passage_refusal(title, text)
            .or_else(|| self.sentence_refusal(title, sentences, i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(question: &str, title: &str, text: &str, config: &ReaderConfig) -> Option<Rule> {
        let sentences = attest_text::text::sentences(text);
        let rules = SentenceRules::new(question, config);
        rules.refusal(title, text, &sentences, sentences.len() - 1)
    }

    #[test]
    fn a_name_typed_without_its_diacritics_is_the_same_name() {
        let on = ReaderConfig::default();
        let text =
            "The emperor was ill. Tugh Temür is known for his cultural contribution instead.";
        assert_eq!(
            refused("What was Tugh Temur known for?", "Yuan dynasty", text, &on),
            None
        );
        let text = "The Prince of Płock, Bolesław II of Masovia, established this settlement in about 1300.";
        assert_eq!(
            refused("Who was Boleslaw II of Masovia?", "Warsaw", text, &on),
            None
        );
        // A look-alike is still one, diacritics or not.
        let text = "The Drift Mïni takes 2 hours to charge.";
        assert_eq!(
            refused(
                "How long does the Drift Max take to charge?",
                "Drift",
                text,
                &on
            ),
            Some(Rule::SubjectsPassage)
        );
    }

    #[test]
    fn each_refusal_names_its_rule_and_its_switch_turns_it_off() {
        let on = ReaderConfig::default();
        let q = "How long does the Drift Max take to charge?";
        let charge = "The Drift Max takes 3 hours to charge.";
        assert_eq!(refused(q, "Drift Max", charge, &on), None);
        let battery = "The Drift Max has a long battery life.";
        assert_eq!(
            refused(q, "Drift Max", battery, &on),
            Some(Rule::Quantities)
        );
        let mini = "The Drift Mini takes 2 hours to charge.";
        assert_eq!(
            refused(q, "Drift Mini", mini, &on),
            Some(Rule::SubjectsPassage)
        );
        let off = ReaderConfig {
            subjects: false,
            ..ReaderConfig::default()
        };
        assert_eq!(refused(q, "Drift Mini", mini, &off), None);
        let sentences = attest_text::text::sentences(mini);
        let all = SentenceRules::new(q, &on).all_refusals("Drift Mini", mini, &sentences, 0);
        assert_eq!(all, [Rule::SubjectsPassage, Rule::SubjectsSentence]);
    }

    #[test]
    fn asked_words_read_the_sentence_before_only_where_the_subject_is_not_named() {
        let on = ReaderConfig::default();
        let q = "What is the page size limit of the Labels API v3?";
        let text = "The Labels API v3 limits pages to 100 items. Request bodies sent to the Labels API v3 may be at most 2 MB.";
        assert_eq!(
            refused(q, "Labels API v3", text, &on),
            Some(Rule::AskedWords)
        );
        let leaning = "The Labels API v3 limits list calls. It returns at most 100 items per page.";
        assert_eq!(refused(q, "Labels API v3", leaning, &on), None);
        let faq = "Q: What page size limit does the Labels API v3 have? A: The Labels API v3 returns 100 items.";
        assert_eq!(refused(q, "Labels API v3", faq, &on), None);
    }

    #[test]
    fn a_sentence_is_overrulable_only_where_every_rule_refusing_it_is() {
        let config = ReaderConfig::default();
        let q = "What is the page size limit of the Labels API v3?";
        let verdict = |text: &str, overrulable: &[Rule]| {
            let sentences = attest_text::text::sentences(text);
            let last = sentences.len() - 1;
            SentenceRules::new(q, &config)
                .seeing([("", "Page sizes are capped.")])
                .sentence_verdict("", &sentences, last, overrulable)
        };
        let body = "Request bodies sent to the Labels API v3 may be at most 2 MB.";
        assert_eq!(verdict(body, &[]), Verdict::Refused(Rule::AskedWords));
        assert_eq!(verdict(body, &[Rule::AskedWords]), Verdict::Overrulable);
        // A look-alike subject refuses it as well: the readers may not overrule that.
        let other = "Request bodies sent to the Labels API v2 may be at most 2 MB.";
        assert_eq!(
            verdict(other, &[Rule::AskedWords]),
            Verdict::Refused(Rule::SubjectsSentence)
        );
        let pages = "The Labels API v3 returns at most 100 items per page.";
        assert_eq!(verdict(pages, &[Rule::AskedWords]), Verdict::Read);
    }

    #[test]
    fn a_lower_case_subject_holds_a_sentence_to_what_is_asked_of_it() {
        let on = ReaderConfig::default();
        let q = "What is the deadline for the sick leave?";
        let amount = "In the US, the sick leave is set at 10 days.";
        assert_eq!(
            refused(q, "Leave policy", amount, &on),
            Some(Rule::AskedWords)
        );
        let deadline = "The deadline for the sick leave is 30 days after the absence.";
        assert_eq!(refused(q, "Leave policy", deadline, &on), None);
        let off = ReaderConfig {
            compounds: false,
            ..ReaderConfig::default()
        };
        assert_eq!(refused(q, "Leave policy", amount, &off), None);
    }

    #[test]
    fn asked_words_hold_only_where_the_passages_have_the_words_for_it() {
        let config = ReaderConfig::default();
        let q = "When was the FSO Car Factory founded?";
        let text = "The FSO Car Factory was established in 1951.";
        let sentences = attest_text::text::sentences(text);
        let alone = SentenceRules::new(q, &config).seeing([("Warsaw", text)]);
        assert_eq!(alone.sentence_refusal("Warsaw", &sentences, 0), None);
        let worded = SentenceRules::new(q, &config)
            .seeing([("Warsaw", text), ("", "The museum was founded in 1990.")]);
        assert_eq!(
            worded.sentence_refusal("Warsaw", &sentences, 0),
            Some(Rule::AskedWords)
        );
    }

    #[test]
    fn a_lower_case_compound_is_the_subject_only_where_the_passages_name_its_kind() {
        let config = ReaderConfig::default();
        let refusal = |q: &str, passages: &[&str], sentence: &str| {
            let rules = SentenceRules::new(q, &config).seeing(passages.iter().map(|p| ("", *p)));
            rules.sentence_refusal("", &[sentence], 0)
        };
        // A policy's allowances: the documents name allowances, so a sentence about the laptop budget is not read
        // for the relocation allowance.
        let q = "How long must staff work before they are eligible for the relocation allowance?";
        let laptop = "Staff become eligible for the laptop budget after 1 months of service.";
        assert!(refusal(
            q,
            &[laptop, "The meal allowance is 30 EUR per day."],
            laptop
        )
        .is_some());
        // A forum question's "the author want" is a subject and its verb, which no passage names.
        let q = "What start date does the author want to use in the game?";
        let post = "Some friends and I are looking to play a long campaign, starting at the 1066 start date.";
        assert_eq!(refusal(q, &[post], post), None);
    }
}
