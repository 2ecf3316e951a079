//! The subjects a question asks about — its names, model numbers and versions ("the Returns API v1", "the Drift
//! Max") — held against a passage. In a company's corpus the topic never disappears with the answer: ten APIs,
//! forty products, six policies look alike, and a reader shown "The Orders API allows 100 requests a minute"
//! answered "What is the rate limit of the Returns API?" from it, "supported" (issue 68). A passage that names a
//! *sibling* of the question's subject — a name sharing words with it but not all of them ("Drift Mini" for
//! "Drift Max", "Returns API v2" for "Returns API v1") — and never the subject itself answers another question:
//! the reader does not read it, and an abstention names what was found instead ([`Subjects::sibling_in`]).
//!
//! Names are runs of capitalised words (not a sentence's first) and identifiers (a token mixing letters and
//! digits, `v1`, `X200`, `S3`, or a dotted version, `2.1`). A passage carries a name when every word of it
//! appears in the passage capitalised, or anywhere in its title (identifiers in any case): the verb "returns"
//! is not the Returns API.

use std::collections::HashSet;

use crate::text;

/// A name of the question: its words lower-cased, possessives dropped ("Max's" → "max").
#[derive(Debug, Clone, PartialEq, Eq)]
struct Name {
    /// As the question writes it, for the abstention's message.
    written: String,
    words: Vec<String>,
}

/// The first words of a sentence, where its subject is named ("In the US, the parental leave comes to …",
/// "Employees based in Australia are entitled to …").
const SUBJECT_PLACE: usize = 4;

/// The question's names, read once per question.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subjects(Vec<Name>);

/// What a passage names in place of one of the question's subjects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sibling {
    /// The question's subject, as the question writes it ("Drift Max").
    pub asked: String,
    /// The passage's look-alike ("Drift Mini").
    pub found: String,
    /// Words the two share: the closer look-alike shares more ("Returns API v2" for "Returns API v1", 2, before
    /// "Orders API v2", 1).
    pub shared: usize,
}

/// An identifier: letters and digits mixed (`v1`, `X200`, `S3`), or a dotted version (`2.1`, `1.4.2`).
fn is_identifier(token: &str) -> bool {
    let has_digit = token.chars().any(|c| c.is_ascii_digit());
    let has_letter = token.chars().any(char::is_alphabetic);
    let dotted_version = token.contains('.')
        && token
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    has_digit && (has_letter || dotted_version)
}

/// A token without the punctuation around it and without a possessive.
fn bare(raw: &str) -> &str {
    let t = raw.trim_matches(|c: char| !c.is_alphanumeric());
    t.strip_suffix("'s")
        .or_else(|| t.strip_suffix("’s"))
        .unwrap_or(t)
}

/// Whether a token (not a sentence's first) is part of a name: capitalised and not a function word, or an
/// identifier.
/// A word with a capital after its first letter (`QueueBacklogGrowing`, `iPhone`): a name even opening a sentence.
fn is_inner_capitalised(token: &str) -> bool {
    token.chars().skip(1).any(char::is_uppercase) && token.chars().any(char::is_lowercase)
}

fn name_like(token: &str) -> bool {
    if token.is_empty() {
        return false;
    }
    if is_identifier(token) {
        return true;
    }
    token.chars().next().is_some_and(char::is_uppercase)
        && !text::is_function_word(&token.to_lowercase())
}

/// The runs of name-like tokens of `text`. With `skip_openers`, a sentence's first token starts no run unless it
/// is an identifier (a question's "What", "Does"); a passage's sentences often open with a name ("Labels API v2
/// will be switched off …") and are read whole.
fn name_runs(text: &str, skip_openers: bool) -> Vec<Vec<&str>> {
    let mut runs: Vec<Vec<&str>> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut sentence_start = true;
    for raw in text.split_whitespace() {
        let token = bare(raw);
        let counts = name_like(token) && (!skip_openers || !sentence_start || is_identifier(token));
        if counts {
            current.push(token);
        } else if !current.is_empty() {
            runs.push(std::mem::take(&mut current));
        }
        // A run ends at punctuation after its token ("the Drift Max, the Drift Mini").
        if counts && raw.ends_with([',', ';', ':', ')', '.', '!', '?']) {
            runs.push(std::mem::take(&mut current));
        }
        sentence_start = raw.ends_with(['.', '!', '?', ':']);
    }
    if !current.is_empty() {
        runs.push(current);
    }
    runs
}

/// Whether `name` is an abbreviation ("UN", "SP", "V&A": two to five capitals, `&` ignored) that `text` spells
/// out: capitalised words whose initials begin with its letters, with only function words between them
/// ("United Nations Framework Convention", "Scottish Parliament's", "Victoria and Albert Museum").
fn abbreviation_spelt_out(name: &Name, text_: &str) -> bool {
    let letters: Vec<char> = name.written.chars().filter(|c| *c != '&').collect();
    if name.words.len() != 1
        || !(2..=5).contains(&letters.len())
        || !letters.iter().all(char::is_ascii_uppercase)
    {
        return false;
    }
    let tokens: Vec<&str> = text_
        .split(|c: char| c.is_whitespace() || c == '_' || c == '-')
        .map(bare)
        .filter(|t| !t.is_empty())
        .collect();
    (0..tokens.len()).any(|start| {
        let mut at = 0;
        for t in &tokens[start..] {
            if at == letters.len() {
                break;
            }
            if t.starts_with(letters[at]) && t.chars().nth(1).is_some_and(char::is_lowercase) {
                at += 1;
            } else if at == 0 || !text::is_function_word(&t.to_lowercase()) {
                break;
            }
        }
        at == letters.len()
    })
}

/// Whether two lower-case words are one word with a slip of the keyboard: both letters only, at least five of
/// them, the same first letter, and one letter added, dropped, changed, or two neighbours swapped. Shorter words
/// and any with a digit are names in their own right ("Max" / "Mix", "v1" / "v2").
fn one_slip_apart(a: &str, b: &str) -> bool {
    // Asked of every word a passage carries: most differ in their first letter, and cost no allocation.
    if a.chars().next() != b.chars().next() {
        return false;
    }
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let letters = |w: &[char]| w.len() >= 5 && w.iter().all(|c| c.is_alphabetic());
    if a == b || !letters(&a) || !letters(&b) || a.len().abs_diff(b.len()) > 1 {
        return false;
    }
    let (short, long) = if a.len() <= b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let first = short
        .iter()
        .zip(long.iter())
        .take_while(|(x, y)| x == y)
        .count();
    if short.len() < long.len() {
        // One letter added: the rest lines up one further on.
        return short[first..] == long[first + 1..];
    }
    // One letter changed, or two neighbours swapped.
    short[first + 1..] == long[first + 1..]
        || (first + 1 < short.len()
            && short[first] == long[first + 1]
            && short[first + 1] == long[first]
            && short[first + 2..] == long[first + 2..])
}

fn lower(tokens: &[&str]) -> Vec<String> {
    tokens.iter().map(|t| t.to_lowercase()).collect()
}

/// What a passage names: the words it writes capitalised (or as identifiers, a sentence's first word too), every
/// word of its title, and its name runs.
struct Carried {
    words: HashSet<String>,
    runs: Vec<Vec<String>>,
    written: Vec<String>,
}

impl Carried {
    fn of(title: &str, passage: &str) -> Self {
        let mut words: HashSet<String> = text::words(title).into_iter().collect();
        let mut runs = Vec::new();
        let mut written = Vec::new();
        for source in [title, passage] {
            for run in name_runs(source, false) {
                words.extend(lower(&run));
                written.push(run.join(" "));
                runs.push(lower(&run));
            }
        }
        Carried {
            words,
            runs,
            written,
        }
    }

    /// Whether every word of `name` is carried: as written, mistyped by one letter ([`one_slip_apart`]: questions
    /// are typed, "John Sheeshanks" for John Sheepshanks), or two of its words written as one ("Sky Drive" for
    /// SkyDrive).
    fn carries(&self, name: &Name) -> bool {
        let carried =
            |w: &str| self.words.contains(w) || self.words.iter().any(|c| one_slip_apart(w, c));
        let words = &name.words;
        let mut i = 0;
        while i < words.len() {
            if i + 1 < words.len() && carried(&format!("{}{}", words[i], words[i + 1])) {
                i += 2;
            } else if carried(&words[i]) {
                i += 1;
            } else {
                return false;
            }
        }
        true
    }

    /// The passage's run that shares a word with `name` and differs from it, the longest overlap first.
    fn sibling_of(&self, name: &Name) -> Option<(usize, &str)> {
        // The run sharing most words, then the longest ("Orders API v2" before a lone "API"), then the first.
        let mut best: Option<(usize, usize, &str)> = None;
        for (run, written) in self.runs.iter().zip(&self.written) {
            if *run == name.words {
                continue;
            }
            let shared = run.iter().filter(|w| name.words.contains(w)).count();
            let better = best.is_none_or(|(s, len, _)| (shared, run.len()) > (s, len));
            if shared > 0 && better {
                best = Some((shared, run.len(), written));
            }
        }
        best.map(|(shared, _, written)| (shared, written))
    }
}

impl Subjects {
    /// The names of `question`; a run of function words or a lone generic word names nothing.
    pub fn of_question(question: &str) -> Self {
        let names = name_runs(question, true)
            .into_iter()
            .map(|run| Name {
                written: run.join(" "),
                words: lower(&run),
            })
            .collect();
        Subjects(names)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every word of the question's names, lower-case.
    pub fn name_words(&self) -> Vec<String> {
        self.0
            .iter()
            .flat_map(|n| n.words.iter().cloned())
            .collect()
    }

    /// What `question` asks of its subjects: its [`attribute_words`] that are no word of a subject ("How long does
    /// the Drift Max take to charge?" → take, charge). Empty when the question names no subject: the rule below
    /// then has nothing to hold a sentence to.
    pub fn asked_of(&self, question: &str) -> HashSet<String> {
        if self.0.is_empty() {
            return HashSet::new();
        }
        let named: HashSet<String> = self
            .0
            .iter()
            .flat_map(|n| n.words.iter().map(|w| text::stem(w)))
            .collect();
        attribute_words(question)
            .into_iter()
            .filter(|w| !named.contains(w))
            .collect()
    }

    /// The first of the question's subjects that the passage (with its title) does not carry while naming a
    /// look-alike of it: the passage answers a neighbouring question. None when every subject is carried, or
    /// when a missing one has no look-alike there (a passage about something else entirely is the topic gates'
    /// business, not this one's).
    pub fn sibling_in(&self, title: &str, passage: &str) -> Option<Sibling> {
        if self.0.is_empty() {
            return None;
        }
        let carried = Carried::of(title, passage);
        self.0.iter().find_map(|name| {
            if carried.carries(name) {
                return None;
            }
            carried.sibling_of(name).map(|(shared, found)| Sibling {
                asked: name.written.clone(),
                found: found.to_string(),
                shared,
            })
        })
    }

    /// Whether `sentence`, read where no word of the question's subjects is named (its passage's title, the
    /// sentence before it, itself), names something else in their place: "QueueBacklogGrowing escalates after 30 minutes"
    /// read for LatencyP99High, "Bluebell Freight was handled by Jonas Weber" for Harbor Foods. A sentence naming
    /// nothing ("He was born in Smiljan") is left to the reader, and so is a name the question writes itself
    /// (`question_words`, lower-case: "Tibetan art from the 14th century …" asked which period of Tibetan art the
    /// museum shows).
    pub fn another_in_place(
        &self,
        question_words: &HashSet<String>,
        title: &str,
        before: &str,
        sentence: &str,
    ) -> bool {
        if self.0.is_empty() {
            return false;
        }
        // Any word of a subject will do here ("Tesla" for "Nikola Tesla"): look-alikes sharing words are
        // `sibling_in`'s.
        let place = format!("{title} {before} {sentence}");
        let context = Carried::of(title, &format!("{before} {sentence}"));
        if self.0.iter().any(|n| {
            n.words.iter().any(|w| context.words.contains(w)) || abbreviation_spelt_out(n, &place)
        }) {
            return false;
        }
        let asked = |t: &str| question_words.contains(&t.to_lowercase());
        let opener_named = sentence
            .split_whitespace()
            .next()
            .map(bare)
            .is_some_and(|t| is_inner_capitalised(t) && !asked(t));
        // A name in the sentence's subject's place (within its first few words) or one its passage is about (in
        // the title); a name further on is what the sentence says of its subject ("Pictet evaporated liquid
        // sulfur dioxide", "ABC became a competitor to NBC").
        let titled: HashSet<String> = text::words(title).into_iter().collect();
        let opening: Vec<&str> = sentence
            .split_whitespace()
            .take(SUBJECT_PLACE)
            .map(bare)
            .collect();
        opener_named
            || name_runs(sentence, true).iter().any(|run| {
                run.iter().all(|t| !asked(t))
                    && (opening.contains(&run[0])
                        || run.iter().all(|t| titled.contains(&t.to_lowercase())))
            })
    }

    /// Whether `text` writes a word of one of the question's subjects ("Tesla" for "Nikola Tesla").
    pub fn any_word_in(&self, text_: &str) -> bool {
        let carried = Carried::of("", text_);
        self.0
            .iter()
            .any(|n| n.words.iter().any(|w| carried.words.contains(w)))
    }

    /// Every word `question` writes, lower-case, as [`Subjects::another_in_place`] takes them.
    pub fn question_words(question: &str) -> HashSet<String> {
        question
            .split_whitespace()
            .map(|t| bare(t).to_lowercase())
            .filter(|t| !t.is_empty())
            .collect()
    }

    /// The question's subjects the passage carries whole (for an abstention that says what was found).
    pub fn carried_in(&self, title: &str, passage: &str) -> Vec<String> {
        let carried = Carried::of(title, passage);
        self.0
            .iter()
            .filter(|n| carried.carries(n))
            .map(|n| n.written.clone())
            .collect()
    }
}

/// Whether `context` (what the reader sees of a sentence) shares a word with what the question asks of its
/// subjects: a sentence that meets the question only in the subject's name ("Battery life of the Drift Max is 10
/// hours" asked how long the Drift Max takes to charge) states another attribute of it.
/// The content words of a question that can say what it asks of its subject ([`text::content_set`], stemmed),
/// without the word of a "how long" or "how often" (the kind of answer, which `quantities` holds a sentence to, not
/// what is asked: as an asked word "long" let "A: The Halo Lite comes with a warranty of 3 years", read with its
/// "Q: How long is the warranty?", answer how long the Halo Lite takes to charge).
pub fn attribute_words(question: &str) -> HashSet<String> {
    let words = text::words(question);
    let how: HashSet<&str> = words
        .windows(2)
        .filter(|w| w[0] == "how" && HOW_WORDS.contains(&w[1].as_str()))
        .map(|w| w[1].as_str())
        .collect();
    text::content_set(question)
        .into_iter()
        .filter(|w| !how.contains(w.as_str()))
        .collect()
}

/// The words after "how" that ask for a kind of answer and are no attribute ("how large" asks of a size, and
/// meets "larger": it stays).
const HOW_WORDS: [&str; 2] = ["long", "often"];

pub fn meets_the_asked(asked: &HashSet<String>, context: &str) -> bool {
    asked.is_empty()
        || text::content_set(context)
            .iter()
            .any(|w| asked.iter().any(|a| same_root(a, w)))
}

/// Two words of one root, by their common start: the whole of the shorter one (at least 3 letters: "own" of
/// "owned") or 4 letters ("marr-y" / "marr-ied", "deci-sion" / "deci-ded", "weig-ht" / "weig-hs"). Crude, and
/// meant to be: the words of a paraphrase that share no root ("price" / "costs", "won" / "winner") still miss,
/// which costs an answer, never a hallucination.
fn same_root(a: &str, b: &str) -> bool {
    let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let shorter = a.chars().count().min(b.chars().count());
    common >= 3 && common >= shorter.min(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_typed_with_a_slip_is_the_name_and_a_look_alike_is_not() {
        for (a, b) in [
            ("sheeshanks", "sheepshanks"),
            ("karistadt", "karlstadt"),
            ("sigimund", "sigismund"),
            ("hamaz", "hamza"),
            ("chafffee", "chaffee"),
        ] {
            assert!(one_slip_apart(a, b) && one_slip_apart(b, a), "{a} / {b}");
        }
        for (a, b) in [
            ("max", "mix"),
            ("mini", "max"),
            ("tracked48", "tracked24"),
            ("orders", "orders"),
            ("karlstadt", "carlstadt"),
            ("returns", "refunds"),
        ] {
            assert!(!one_slip_apart(a, b), "{a} / {b}");
        }
        let slipped =
            Subjects::of_question("How many paintings did John Sheeshanks give to the museum?");
        let text = "In 1857 John Sheepshanks donated 233 paintings to the museum, as John Constable's family did.";
        assert_eq!(slipped.sibling_in("Victoria and Albert Museum", text), None);
        let joined = Subjects::of_question("What did Microsoft rename Sky Drive Pro to?");
        let text = "Microsoft announced that \"SkyDrive Pro\" becomes \"OneDrive for Business\".";
        assert_eq!(joined.sibling_in("Sky", text), None);
        // A look-alike stays one: another word, not a slip.
        let max = Subjects::of_question("How long does the Drift Max take to charge?");
        assert!(max
            .sibling_in("Drift", "The Drift Mini takes 2 hours to charge.")
            .is_some());
    }

    #[test]
    fn how_long_asks_a_kind_of_answer_not_an_attribute() {
        let q = "How long does the Halo Lite take to charge?";
        let asked = Subjects::of_question(q).asked_of(q);
        assert!(!asked.contains("long"), "{asked:?}");
        // An FAQ's answer read with its question: "long" there asks of the warranty.
        assert!(!meets_the_asked(
            &asked,
            "Q: How long is the warranty of the Halo Lite? A: The Halo Lite comes with a warranty of 3 years."
        ));
        assert!(meets_the_asked(
            &asked,
            "The Halo Lite takes 2 hours to charge."
        ));
    }

    #[test]
    fn a_sentence_meeting_the_question_only_in_its_subject_states_another_attribute() {
        let q = "How long does the Drift Max take to charge?";
        let asked = Subjects::of_question(q).asked_of(q);
        assert!(!meets_the_asked(
            &asked,
            "Drift Max review. Battery life of the Drift Max is 10 hours."
        ));
        assert!(meets_the_asked(
            &asked,
            "Drift Max review. The Drift Max takes 3 hours to charge."
        ));
        // A question naming no subject holds no sentence to it.
        let q = "how long does it take to charge?";
        assert!(meets_the_asked(
            &Subjects::of_question(q).asked_of(q),
            "Battery life is 10 hours."
        ));
    }

    #[test]
    fn words_of_one_root_meet_and_a_bare_shared_start_does_not() {
        let q = "How long does the Drift Max take to charge?";
        let asked = Subjects::of_question(q).asked_of(q);
        assert!(meets_the_asked(
            &asked,
            "Charging the Drift Max from empty: 3 hours."
        ));
        assert!(!meets_the_asked(&asked, "The Drift Max chassis is steel."));
        let q = "Who owns Project Falcon?";
        let asked = Subjects::of_question(q).asked_of(q);
        assert!(meets_the_asked(
            &asked,
            "Project Falcon is owned by Ines Duarte."
        ));
        let q = "Who did Berengaria of Navarre marry?";
        let asked = Subjects::of_question(q).asked_of(q);
        assert!(meets_the_asked(
            &asked,
            "Richard married Berengaria of Navarre."
        ));
    }

    fn sibling(question: &str, title: &str, passage: &str) -> Option<(String, String)> {
        Subjects::of_question(question)
            .sibling_in(title, passage)
            .map(|s| (s.asked, s.found))
    }

    #[test]
    fn a_sibling_entity_is_found_and_named() {
        let got = sibling(
            "What is the default rate limit of the Returns API?",
            "Orders API reference",
            "The Orders API allows 100 requests per minute. It returns 429 above that.",
        );
        assert_eq!(got, Some(("Returns API".into(), "Orders API".into())));
        let got = sibling(
            "How long does the Drift Max take to charge?",
            "Drift Mini review",
            "The Drift Mini charges fully in 2 hours.",
        );
        assert_eq!(got, Some(("Drift Max".into(), "Drift Mini".into())));
    }

    #[test]
    fn another_version_is_a_sibling() {
        let got = sibling(
            "When is the Labels API v1 switched off?",
            "Labels API v2 reference",
            "Labels API v2 will be switched off on 1 March 2027.",
        );
        assert_eq!(got, Some(("Labels API v1".into(), "Labels API v2".into())));
        assert_eq!(
            sibling(
                "When is the Labels API v2 switched off?",
                "Labels API v2 reference",
                "It will be switched off on 1 March 2027."
            ),
            None
        );
    }

    #[test]
    fn the_subject_itself_or_no_lookalike_is_not_a_near_miss() {
        // Carried: by the title, or capitalised in the text.
        assert_eq!(
            sibling(
                "What is the rate limit of the Returns API?",
                "Returns API",
                "It allows 50 requests per minute; the Orders API allows 100."
            ),
            None
        );
        // A lower-case verb does not carry a name, but with no look-alike the passage is simply off topic.
        assert_eq!(
            sibling(
                "What is the rate limit of the Returns API?",
                "Shipping guide",
                "A parcel returns to the depot after three attempts."
            ),
            None
        );
        // Wikipedia shapes stay readable.
        assert_eq!(
            sibling(
                "What modern-day country was Tesla's birthplace?",
                "Nikola Tesla",
                "He was born in the village of Smiljan, in modern-day Croatia."
            ),
            None
        );
        assert_eq!(
            sibling(
                "how long does it take to charge?",
                "Drift Mini",
                "Two hours."
            ),
            None
        );
    }

    #[test]
    fn identifiers_and_runs_are_read_as_written() {
        assert!(is_identifier("v1") && is_identifier("X200") && is_identifier("2.1"));
        assert!(!is_identifier("2027") && !is_identifier("API") && !is_identifier("3."));
        let runs = name_runs(
            "Compared with the Drift Max, the Drift Mini (v2) is lighter.",
            true,
        );
        assert_eq!(
            runs,
            vec![vec!["Drift", "Max"], vec!["Drift", "Mini", "v2"]]
        );
        let s = Subjects::of_question("Does the Drift Max's battery last?");
        assert_eq!(
            s.carried_in("Drift Max manual", "Battery: 10 h."),
            vec!["Drift Max"]
        );
    }

    #[test]
    fn another_name_in_the_subjects_place() {
        let another = |q: &str, title: &str, before: &str, sentence: &str| {
            Subjects::of_question(q).another_in_place(
                &Subjects::question_words(q),
                title,
                before,
                sentence,
            )
        };
        let q = "After how long does LatencyP99High escalate out of hours?";
        assert!(another(
            q,
            "On-call runbook",
            "",
            "QueueBacklogGrowing escalates after 30 minutes out of hours."
        ));
        assert!(!another(
            q,
            "On-call runbook",
            "LatencyP99High pages the primary.",
            "It escalates after 30 minutes out of hours."
        ));
        let q = "Who handled the ticket from Harbor Foods?";
        assert!(another(
            q,
            "Ticket 12",
            "",
            "Bluebell Freight was handled by Jonas Weber from start to finish."
        ));
        let q = "Where was Nikola Tesla born?";
        assert!(!another(q, "Tesla", "", "He was born in Smiljan."));
        assert!(!another(
            q,
            "Biography",
            "",
            "He was born in a small village."
        ));
        // An abbreviation spelt out names the subject.
        let q = "What is the UN's climate change treaty?";
        assert!(!another(
            q,
            "IPCC",
            "",
            "The IPCC supports the United Nations Framework Convention on Climate Change."
        ));
        assert!(another(
            q,
            "IPCC",
            "",
            "The IPCC supports the Kyoto Protocol."
        ));
        let q = "What does the V&A hold?";
        assert!(!another(
            q,
            "Victoria_and_Albert_Museum",
            "",
            "Dale Chihuly made its chandelier."
        ));
        // A name the question writes is no other subject.
        let q = "Tibetan art from which period is represented in the V&A collection?";
        assert!(!another(
            q,
            "Victoria and Albert Museum",
            "",
            "Tibetan art from the 14th to the 19th century is represented by religious images."
        ));
        assert!(another(
            q,
            "Collections",
            "",
            "Beside it the Ashmolean shows Tibetan art from the 14th century."
        ));
        // A name further on is what the sentence says of its subject, unless the passage is about it.
        let q = "Who liquefied oxygen for the Royal Society?";
        let pictet = "Using a cascade method, the physicist Raoul Pictet liquefied it.";
        assert!(!another(q, "Chemistry", "", pictet));
        assert!(another(q, "Raoul Pictet", "", pictet));
    }
}
