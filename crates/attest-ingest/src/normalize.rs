//! Text normalisation applied to every title and text before it is stored, chunked or embedded.
//!
//! Output guarantees: NFKC, no control characters, no leading/trailing whitespace, every
//! whitespace run is either a single space or (if it held a blank line) exactly `"\n\n"`.

use unicode_normalization::UnicodeNormalization;

/// Normalises `s`: NFKC, control characters dropped, whitespace runs collapsed to one space
/// except paragraph breaks (a blank line), which become `"\n\n"`; trimmed.
///
/// The function is idempotent: `normalize_text(&normalize_text(s)) == normalize_text(s)`.
pub fn normalize_text(s: &str) -> String {
    // Controls are removed *before* NFKC: removing one afterwards could leave a base character
    // next to a combining mark it was separated from, which would no longer be in normal form.
    let cleaned = strip_controls(s);
    collapse_whitespace(cleaned.nfkc())
}

/// Maps every line terminator to `\n` and drops the other control characters.
fn strip_controls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                // CRLF is one line break, not two (which would read as a paragraph break).
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push('\n');
            }
            '\n' | '\u{85}' | '\u{2028}' => out.push('\n'),
            // A page break (form feed, common in PDF-to-text output) or a paragraph separator
            // ends a paragraph.
            '\u{0C}' | '\u{2029}' => out.push_str("\n\n"),
            '\t' | '\u{0B}' => out.push(' '),
            // A byte-order mark in the middle of text is a concatenation artefact, not content.
            '\u{FEFF}' => {}
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

fn collapse_whitespace(chars: impl Iterator<Item = char>) -> String {
    let mut out = String::new();
    let mut in_space = false;
    let mut newlines = 0usize;
    for c in chars {
        if c == '\n' {
            in_space = true;
            newlines += 1;
        } else if c.is_whitespace() {
            in_space = true;
        } else {
            if in_space && !out.is_empty() {
                out.push_str(if newlines >= 2 { "\n\n" } else { " " });
            }
            in_space = false;
            newlines = 0;
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn nfkc_folds_ligatures_and_full_width() {
        assert_eq!(normalize_text("ﬁle"), "file");
        assert_eq!(normalize_text("１２３ＡＢＣ"), "123ABC");
        assert_eq!(normalize_text("e\u{301}"), "\u{e9}");
    }

    #[test]
    fn controls_are_removed() {
        assert_eq!(normalize_text("a\u{0}b\u{1b}[0mc\u{7f}d"), "ab[0mcd");
        assert_eq!(normalize_text("x\u{9c}y\u{FEFF}z"), "xyz");
    }

    #[test]
    fn whitespace_collapses_but_paragraphs_survive() {
        assert_eq!(normalize_text("  a \t b\nc  "), "a b c");
        assert_eq!(normalize_text("a\n\nb"), "a\n\nb");
        assert_eq!(normalize_text("a \n \t \n\n  b"), "a\n\nb");
        assert_eq!(normalize_text("a\r\nb"), "a b");
        assert_eq!(normalize_text("a\r\n\r\nb"), "a\n\nb");
        assert_eq!(normalize_text("a\rb"), "a b");
        assert_eq!(normalize_text("a\u{2029}b\u{0C}c"), "a\n\nb\n\nc");
        assert_eq!(normalize_text("a\u{a0}\u{3000}b"), "a b");
    }

    #[test]
    fn empty_and_blank_inputs() {
        assert_eq!(normalize_text(""), "");
        assert_eq!(normalize_text(" \n\n\t \u{0}"), "");
    }

    #[test]
    fn removed_control_does_not_break_normal_form() {
        assert_eq!(normalize_text("e\u{0}\u{301}"), "\u{e9}");
    }

    proptest! {
        #[test]
        fn idempotent(s in any::<String>()) {
            let once = normalize_text(&s);
            prop_assert_eq!(normalize_text(&once), once.clone());
        }

        #[test]
        fn output_shape(s in any::<String>()) {
            let out = normalize_text(&s);
            prop_assert_eq!(out.trim(), out.as_str());
            prop_assert!(!out.chars().any(|c| c.is_control() && c != '\n'));
            prop_assert!(!out.contains("  ") && !out.contains("\n\n\n") && !out.contains(" \n") && !out.contains("\n "));
        }
    }
}
