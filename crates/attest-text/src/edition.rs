//! Editions: a name that the question qualifies with a number — "Super Bowl 50", "Apollo 11", "World War II",
//! "January 7" — against a sentence that names the same thing with another number ("… in 1985 (Super Bowl XIX) …,
//! won by the home team 49ers") is a true sentence about something else. Reader round 9 was trained against such
//! sentences (`scripts/reader/data.py` `perturb_sentence`) and still answered "Who won Super Bowl 50?" from the
//! Super Bowl XIX sentence (issue 41; round 8 too), so no reader model is trusted with them: the reader does not
//! read them at all, as it does not read sentences off the question's topic. A sentence that also names the
//! question's own edition is read.

/// At most this many capitalised words before the number make its name.
const LONGEST_NAME: usize = 4;

/// A name and the number that qualifies it, lower-cased words: (["super", "bowl"], 50).
type Qualified = (Vec<String>, u32);

/// Roman digits, largest first, with the subtractive pairs.
const ROMAN_DIGITS: [(u32, &str); 13] = [
    (1000, "M"),
    (900, "CM"),
    (500, "D"),
    (400, "CD"),
    (100, "C"),
    (90, "XC"),
    (50, "L"),
    (40, "XL"),
    (10, "X"),
    (9, "IX"),
    (5, "V"),
    (4, "IV"),
    (1, "I"),
];

/// The value of an upper-case Roman numeral written the usual way ("XIX" → 19), else None.
fn roman_value(token: &str) -> Option<u32> {
    if token.is_empty() || token.len() > 8 || !token.chars().all(|c| "IVXLCDM".contains(c)) {
        return None;
    }
    let (mut rest, mut value) = (token, 0);
    for (v, letters) in ROMAN_DIGITS {
        while let Some(after) = rest.strip_prefix(letters) {
            value += v;
            rest = after;
        }
    }
    // Only the canonical spelling counts ("IIII" or "VX" are not numerals).
    (rest.is_empty() && to_roman(value) == token).then_some(value)
}

fn to_roman(mut n: u32) -> String {
    let mut out = String::new();
    for (v, letters) in ROMAN_DIGITS {
        while n >= v {
            out.push_str(letters);
            n -= v;
        }
    }
    out
}

/// An edition's number: up to four digits (years count: "Windows 2000", "Paris 2024"; amounts do not), or a
/// Roman numeral.
fn number_value(token: &str) -> Option<u32> {
    if !token.is_empty() && token.len() <= 4 && token.chars().all(|c| c.is_ascii_digit()) {
        return token.parse().ok();
    }
    roman_value(token)
}

/// The words of `text` without the punctuation around them.
fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split_whitespace()
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric()))
}

/// Every capitalised name followed by a number (Arabic or Roman) in `text`.
fn qualified_names(text: &str) -> Vec<Qualified> {
    let tokens: Vec<&str> = tokens(text).collect();
    let mut out = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let Some(value) = number_value(token) else {
            continue;
        };
        let name: Vec<String> = tokens[..i]
            .iter()
            .rev()
            .take_while(|t| {
                t.chars().next().is_some_and(char::is_uppercase) && number_value(t).is_none()
            })
            .take(LONGEST_NAME)
            .map(|t| t.to_lowercase())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if !name.is_empty() {
            out.push((name, value));
        }
    }
    out
}

/// The question's qualified names, read once per question.
#[derive(Debug, Clone, Default)]
pub struct Editions(Vec<Qualified>);

impl Editions {
    pub fn of_question(question: &str) -> Self {
        Editions(qualified_names(question))
    }

    /// Whether `sentence` names one of the question's qualified names with another number, and holds the
    /// question's number nowhere (not "Super Bowls I and II" for "Super Bowl II", not "9 October 2004" for
    /// "October 9, 2004", not "Windows 7 to 10" for "Windows 10").
    pub fn names_another(&self, sentence: &str) -> bool {
        if self.0.is_empty() {
            return false;
        }
        let found = qualified_names(sentence);
        let numbers: Vec<u32> = tokens(sentence).filter_map(number_value).collect();
        self.0.iter().any(|(name, value)| {
            found.iter().any(|(other, _)| other.ends_with(name)) && !numbers.contains(value)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn another(question: &str, sentence: &str) -> bool {
        Editions::of_question(question).names_another(sentence)
    }

    #[test]
    fn another_super_bowl_is_another_edition() {
        let xix = "The San Francisco Bay Area last hosted in 1985 (Super Bowl XIX), held at Stanford Stadium in \
                   Stanford, California, won by the home team 49ers.";
        assert!(another("Who won Super Bowl 50?", xix));
        assert!(another(
            "Who won Super Bowl 50?",
            "The Patriots won Super Bowl 49."
        ));
        assert!(another(
            "When did Apollo 11 land?",
            "Apollo 12 landed in the Ocean of Storms."
        ));
        assert!(another(
            "Who fought in World War II?",
            "World War I began in 1914."
        ));
    }

    #[test]
    fn the_same_edition_or_no_edition_is_read() {
        let broncos = "The Denver Broncos defeated the Carolina Panthers to win Super Bowl 50.";
        assert!(!another("Who won Super Bowl 50?", broncos));
        assert!(!another(
            "Who won Super Bowl 50?",
            "Super Bowl L was the first Super Bowl numbered in Arabic."
        ));
        assert!(!another(
            "Who won Super Bowl 50?",
            "The Broncos defeated the Panthers 24-10 to earn their third Super Bowl title."
        ));
        // Both editions named: the sentence may be comparing them, and is read.
        assert!(!another(
            "Who won Super Bowl 50?",
            "Unlike Super Bowl 49, Super Bowl 50 was won by Denver."
        ));
        // The question's number is there in another shape (measured on squad-dev and shift-reddit).
        assert!(!another(
            "Who was the Most Valuable Player of Super Bowl II?",
            "Bart Starr (MVP of Super Bowls I and II) and Chuck Howley (MVP of Super Bowl V) appeared via video."
        ));
        assert!(!another(
            "Who opened the new Parliament building on October 9, 2004?",
            "Queen Elizabeth II opened the new building on 9 October 2004."
        ));
        assert!(!another(
            "What is Windows 10 being upgraded from?",
            "Windows 7 to 10 upgrade then clean install activation issues."
        ));
        // A question without a qualified name never rules a sentence out.
        assert!(!another(
            "Who won the game?",
            "The Patriots won Super Bowl 49."
        ));
        // Another name with a number is not the question's.
        assert!(!another(
            "Who won Super Bowl 50?",
            "Interstate 280 was closed."
        ));
    }

    #[test]
    fn roman_numerals_are_read_only_when_canonical() {
        assert_eq!(roman_value("XIX"), Some(19));
        assert_eq!(roman_value("L"), Some(50));
        assert_eq!(roman_value("MCMXCIV"), Some(1994));
        assert_eq!(roman_value("IIII"), None);
        assert_eq!(roman_value("VX"), None);
        assert_eq!(roman_value("Bowl"), None);
    }
}
