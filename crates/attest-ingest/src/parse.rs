//! Parsers turning raw files (JSONL corpora, Markdown, plain text) into validated, normalised
//! [`SourceDocument`]s. JSONL errors are collected per line so one bad record never sinks a file.

use std::path::Path;

use serde_json::{Map, Value};

use crate::document::{normalized_within, unknown_fields, DocumentLimits, SourceDocument};
use crate::error::IngestError;
use crate::normalize::normalize_text;

/// Plain-text files only get a title when their first line is this short (in characters);
/// a longer first line is body text, not a heading.
const PLAIN_TITLE_MAX_CHARS: usize = 120;

/// A JSONL line that was skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// 1-based.
    pub line: usize,
    pub reason: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

/// What a file yielded: the accepted documents, in file order, and the rejected lines.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    pub documents: Vec<SourceDocument>,
    /// The 1-based line of each document (`lines[i]` for `documents[i]`; 1 for a Markdown or text file).
    pub lines: Vec<usize>,
    pub errors: Vec<LineError>,
}

/// [`parse_jsonl_with`] under the default [`DocumentLimits`].
pub fn parse_jsonl(bytes: &[u8]) -> Parsed {
    parse_jsonl_with(bytes, &DocumentLimits::default())
}

/// Parses one JSON object per line: `id` (string or number; `_id` is accepted as in BEIR
/// corpora), `text` (required), and optional `title`, `metadata` (object) and `tenant`.
/// A line with any other field is refused, the field named. Blank lines are skipped; every other
/// line either yields a document or a [`LineError`].
pub fn parse_jsonl_with(bytes: &[u8], limits: &DocumentLimits) -> Parsed {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let mut parsed = Parsed::default();
    for (index, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = index + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        match parse_jsonl_line(raw, limits) {
            Ok(Some(doc)) => {
                parsed.documents.push(doc);
                parsed.lines.push(line);
            }
            Ok(None) => {}
            Err(reason) => parsed.errors.push(LineError { line, reason }),
        }
    }
    parsed
}

/// `Ok(None)` for a blank line.
fn parse_jsonl_line(raw: &[u8], limits: &DocumentLimits) -> Result<Option<SourceDocument>, String> {
    let text = std::str::from_utf8(raw)
        .map_err(|e| format!("invalid UTF-8 at byte {} of the line", e.valid_up_to()))?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let value: Value = serde_json::from_str(text).map_err(|e| json_reason(&e))?;
    let Value::Object(mut obj) = value else {
        return Err(format!("expected a JSON object, found {}", kind(&value)));
    };
    if let Some(reason) = unknown_fields(obj.keys().filter(|k| *k != "_id")) {
        return Err(reason);
    }

    let id = match (obj.remove("id"), obj.remove("_id")) {
        (Some(_), Some(_)) => return Err("both `id` and `_id`: give one".to_string()),
        (id, alias) => id.or(alias),
    };
    let id = match id {
        Some(Value::String(s)) => s,
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => {
            return Err(format!(
                "`id` must be a string or number, found {}",
                kind(&other)
            ))
        }
        None => return Err("missing `id` (or `_id`)".to_string()),
    };
    let title = match obj.remove("title") {
        Some(Value::String(s)) => {
            normalized_within(&s, "title", limits.max_title_len).map_err(|e| e.to_string())?
        }
        None | Some(Value::Null) => String::new(),
        Some(other) => return Err(format!("`title` must be a string, found {}", kind(&other))),
    };
    let text = match obj.remove("text") {
        Some(Value::String(s)) => {
            normalized_within(&s, "text", limits.max_text_bytes).map_err(|e| e.to_string())?
        }
        Some(other) => return Err(format!("`text` must be a string, found {}", kind(&other))),
        None => return Err("missing `text`".to_string()),
    };
    if text.is_empty() {
        return Err("`text` is empty after normalisation".to_string());
    }
    let metadata = match obj.remove("metadata") {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => Map::new(),
        Some(other) => {
            return Err(format!(
                "`metadata` must be an object, found {}",
                kind(&other)
            ))
        }
    };
    let tenant = match obj.remove("tenant") {
        Some(Value::String(s)) => Some(s),
        None | Some(Value::Null) => None,
        Some(other) => return Err(format!("`tenant` must be a string, found {}", kind(&other))),
    };

    let doc = SourceDocument {
        id,
        title,
        text,
        metadata,
        tenant,
    };
    doc.validate(limits)
        .map_err(|e| format!("document `{}`: {e}", truncate_chars(&doc.id, 80)))?;
    Ok(Some(doc))
}

/// serde_json reports "at line 1 column N", and line 1 is meaningless inside one JSONL line.
fn json_reason(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let msg = msg
        .rsplit_once(" at line ")
        .map_or(msg.as_str(), |(m, _)| m);
    format!("invalid JSON at column {}: {msg}", e.column())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// [`parse_markdown_with`] under the default [`DocumentLimits`].
pub fn parse_markdown(id: &str, bytes: &[u8]) -> Result<SourceDocument, IngestError> {
    parse_markdown_with(id, bytes, &DocumentLimits::default())
}

/// Title: the first ATX heading (`# ...`, any level) outside code fences, else `id`.
/// Text: headings become their own paragraphs with the `#` markers removed; code fences are
/// kept verbatim (markers included) as their own paragraphs; then [`normalize_text`].
pub fn parse_markdown_with(
    id: &str,
    bytes: &[u8],
    limits: &DocumentLimits,
) -> Result<SourceDocument, IngestError> {
    let src = decode(id, bytes)?;
    let (heading, body) = markdown_body(src);
    let title = heading.unwrap_or_else(|| normalize_text(id));
    build(id, title, &body, limits)
}

/// [`parse_plain_text_with`] under the default [`DocumentLimits`].
pub fn parse_plain_text(id: &str, bytes: &[u8]) -> Result<SourceDocument, IngestError> {
    parse_plain_text_with(id, bytes, &DocumentLimits::default())
}

/// Title: the first non-blank line when it is at most 120 characters, else empty.
/// Text: the whole file (title line included), normalised.
pub fn parse_plain_text_with(
    id: &str,
    bytes: &[u8],
    limits: &DocumentLimits,
) -> Result<SourceDocument, IngestError> {
    let src = decode(id, bytes)?;
    let title = src
        .lines()
        .map(normalize_text)
        .find(|l| !l.is_empty())
        .filter(|l| l.chars().count() <= PLAIN_TITLE_MAX_CHARS)
        .unwrap_or_default();
    build(id, title, src, limits)
}

/// [`parse_file_with`] under the default [`DocumentLimits`].
pub fn parse_file(path: &Path) -> Result<Parsed, IngestError> {
    parse_file_with(path, &DocumentLimits::default())
}

/// Dispatches on the extension (case-insensitive): `.jsonl`/`.ndjson` → JSONL,
/// `.md`/`.markdown` → Markdown, anything else → plain text. A Markdown or text file is one
/// document whose id is the path as given, so equal file names in different folders differ.
pub fn parse_file_with(path: &Path, limits: &DocumentLimits) -> Result<Parsed, IngestError> {
    let bytes = std::fs::read(path)?;
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let id = path.to_string_lossy();
    let doc = match ext.as_str() {
        "jsonl" | "ndjson" => return Ok(parse_jsonl_with(&bytes, limits)),
        "md" | "markdown" => parse_markdown_with(&id, &bytes, limits)?,
        _ => parse_plain_text_with(&id, &bytes, limits)?,
    };
    Ok(Parsed {
        documents: vec![doc],
        lines: vec![1],
        errors: Vec::new(),
    })
}

fn decode<'a>(id: &str, bytes: &'a [u8]) -> Result<&'a str, IngestError> {
    let s = std::str::from_utf8(bytes)
        .map_err(|e| IngestError::InvalidUtf8(format!("in `{id}` at byte {}", e.valid_up_to())))?;
    Ok(s.strip_prefix('\u{FEFF}').unwrap_or(s))
}

fn build(
    id: &str,
    title: String,
    raw_text: &str,
    limits: &DocumentLimits,
) -> Result<SourceDocument, IngestError> {
    // Derived titles are a convenience: an over-long heading should shorten the title, not
    // reject the whole file.
    let title = truncate_bytes(&title, limits.max_title_len)
        .trim_end()
        .to_string();
    let doc = SourceDocument {
        id: id.to_string(),
        title,
        text: normalize_text(raw_text),
        metadata: Map::new(),
        tenant: None,
    };
    doc.validate(limits)?;
    Ok(doc)
}

fn truncate_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn truncate_chars(s: &str, max: usize) -> &str {
    s.char_indices().nth(max).map_or(s, |(i, _)| &s[..i])
}

/// Returns the first heading (normalised, if non-empty) and the text with Markdown structure
/// turned into paragraphs.
fn markdown_body(src: &str) -> (Option<String>, String) {
    let mut title = None;
    let mut out = String::with_capacity(src.len() + 16);
    let mut fence: Option<(char, usize)> = None;
    for line in src.lines() {
        if let Some((ch, len)) = fence {
            out.push_str(line);
            out.push('\n');
            if is_fence_close(line, ch, len) {
                fence = None;
                out.push('\n');
            }
            continue;
        }
        if let Some(open) = fence_open(line) {
            fence = Some(open);
            // Blank lines around code keep it from being glued to the prose sentence before it.
            out.push('\n');
            out.push_str(line);
            out.push('\n');
            continue;
        }
        if let Some(heading) = atx_heading(line) {
            if title.is_none() {
                let t = normalize_text(heading);
                if !t.is_empty() {
                    title = Some(t);
                }
            }
            out.push('\n');
            out.push_str(heading);
            out.push_str("\n\n");
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    (title, out)
}

/// Strips up to three spaces of indentation, as CommonMark allows for headings and fences.
fn unindent(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    (indent <= 3).then(|| &line[indent..])
}

/// The heading text of an ATX heading line (`#`..`######` then a space or end of line),
/// without the optional closing `#` sequence.
fn atx_heading(line: &str) -> Option<&str> {
    let rest = unindent(line)?;
    let level = rest.len() - rest.trim_start_matches('#').len();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &rest[level..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let content = rest.trim();
    let without_closing = content.trim_end_matches('#');
    if without_closing.is_empty() {
        return Some("");
    }
    if without_closing.ends_with([' ', '\t']) {
        return Some(without_closing.trim_end());
    }
    Some(content)
}

fn fence_open(line: &str) -> Option<(char, usize)> {
    let rest = unindent(line)?;
    let ch = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = rest.len() - rest.trim_start_matches(ch).len();
    if len < 3 {
        return None;
    }
    // CommonMark: a backtick fence's info string may not contain backticks (it is inline code).
    if ch == '`' && rest[len..].contains('`') {
        return None;
    }
    Some((ch, len))
}

fn is_fence_close(line: &str, ch: char, open_len: usize) -> bool {
    let Some(rest) = unindent(line) else {
        return false;
    };
    let len = rest.len() - rest.trim_start_matches(ch).len();
    len >= open_len && rest[len..].trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn jsonl_reports_bad_lines_and_keeps_good_ones() {
        let input = concat!(
            "{\"id\": \"a\", \"title\": \"T\", \"text\": \"alpha\"}\n",
            "not json\n",
            "\n",
            "[1, 2]\n",
            "{\"_id\": 7, \"text\": \"beta\", \"metadata\": {\"k\": \"v\"}, \"tenant\": \"t1\"}\n",
            "{\"text\": \"no id\"}\n",
            "{\"id\": \"c\"}\n",
            "{\"id\": \"d\", \"text\": \" \\u0000 \"}\n",
            "{\"id\": \"e\", \"text\": \"x\", \"metadata\": {\"n\": {\"deep\": 1}}}\n",
            "{\"id\": \"f\", \"text\": \"gamma\"}",
        );
        let parsed = parse_jsonl(input.as_bytes());
        let ids: Vec<_> = parsed.documents.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["a", "7", "f"]);
        let lines: Vec<_> = parsed.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, [2, 4, 6, 7, 8, 9]);
        let reason = |line: usize| {
            &parsed
                .errors
                .iter()
                .find(|e| e.line == line)
                .unwrap()
                .reason
        };
        assert!(
            reason(2).starts_with("invalid JSON at column 2: "),
            "{}",
            reason(2)
        );
        assert_eq!(reason(4), "expected a JSON object, found an array");
        assert_eq!(reason(6), "missing `id` (or `_id`)");
        assert_eq!(reason(7), "missing `text`");
        assert_eq!(reason(8), "`text` is empty after normalisation");
        assert!(reason(9).contains("`metadata.n`"), "{}", reason(9));

        let b = &parsed.documents[1];
        assert_eq!(b.title, "");
        assert_eq!(b.metadata.get("k"), Some(&json!("v")));
        assert_eq!(b.tenant.as_deref(), Some("t1"));
    }

    #[test]
    fn jsonl_invalid_utf8_line() {
        let mut input = b"{\"id\":\"a\",\"text\":\"ok\"}\r\n{\"id\":\"b\",\"text\":\"".to_vec();
        input.extend_from_slice(&[0xff, 0xfe]);
        input.extend_from_slice(b"\"}\n{\"id\":\"c\",\"text\":\"fine\"}\n");
        let parsed = parse_jsonl(&input);
        assert_eq!(parsed.documents.len(), 2);
        assert_eq!(parsed.documents[1].id, "c");
        assert_eq!(
            parsed.errors,
            [LineError {
                line: 2,
                reason: "invalid UTF-8 at byte 18 of the line".into()
            }]
        );
    }

    #[test]
    fn jsonl_normalises_and_validates() {
        let input = "\u{FEFF}{\"id\":\"x\",\"title\":\" ﬁne\\ttitle \",\"text\":\"１２ apples\\n\\n\\nok\"}\n";
        let parsed = parse_jsonl(input.as_bytes());
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        assert_eq!(parsed.documents[0].title, "fine title");
        assert_eq!(parsed.documents[0].text, "12 apples\n\nok");

        let limits = DocumentLimits {
            max_text_bytes: 3,
            ..DocumentLimits::default()
        };
        let parsed = parse_jsonl_with(b"{\"id\":\"x\",\"text\":\"four\"}", &limits);
        assert_eq!(parsed.errors.len(), 1);
        assert!(
            parsed.errors[0].reason.contains("`text`"),
            "{}",
            parsed.errors[0]
        );
    }

    #[test]
    fn jsonl_type_errors() {
        let parsed = parse_jsonl(
            br#"{"id": true, "text": "a"}
{"id": "a", "text": 3}
{"id": "a", "text": "x", "metadata": [1]}
{"id": "a", "text": "x", "tenant": 1}
{"id": "a", "text": "x", "title": {}}
"#,
        );
        assert!(parsed.documents.is_empty());
        let reasons: Vec<_> = parsed.errors.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "`id` must be a string or number, found a boolean",
                "`text` must be a string, found a number",
                "`metadata` must be an object, found an array",
                "`tenant` must be a string, found a number",
                "`title` must be a string, found an object",
            ]
        );
    }

    #[test]
    fn jsonl_refuses_unknown_fields_by_name() {
        let parsed = parse_jsonl(
            br#"{"id": "a", "text": "x", "colour": "red"}
{"id": "b", "text": "x", "url": "u", "source": "s"}
{"id": "c", "_id": "c", "text": "x"}
{"_id": "d", "title": "T", "text": "x", "metadata": {"k": 1}, "tenant": "t"}
"#,
        );
        let ids: Vec<_> = parsed.documents.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["d"]);
        let reasons: Vec<_> = parsed
            .errors
            .iter()
            .map(|e| (e.line, e.reason.as_str()))
            .collect();
        assert_eq!(
            reasons,
            [
                (
                    1,
                    "unknown field `colour`: a document has `id`, `title`, `text`, `metadata`, `tenant`"
                ),
                (
                    2,
                    "unknown fields `source`, `url`: a document has `id`, `title`, `text`, `metadata`, `tenant`"
                ),
                (3, "both `id` and `_id`: give one"),
            ]
        );
    }

    #[test]
    fn jsonl_empty_input() {
        assert_eq!(parse_jsonl(b""), Parsed::default());
        assert_eq!(parse_jsonl(b"\n\r\n  \n"), Parsed::default());
    }

    #[test]
    fn markdown_title_and_body() {
        let md =
            "Intro line\n\n## Setup ##\nInstall it.\n```sh\n# not a heading\nmake\n```\n# Later\n";
        let doc = parse_markdown("docs/a.md", md.as_bytes()).unwrap();
        assert_eq!(doc.title, "Setup");
        assert_eq!(
            doc.text,
            "Intro line\n\nSetup\n\nInstall it.\n\n```sh # not a heading make ```\n\nLater"
        );
    }

    #[test]
    fn markdown_without_heading_uses_id() {
        let doc = parse_markdown("notes/b.md", b"just text\n#hashtag is not a heading").unwrap();
        assert_eq!(doc.title, "notes/b.md");
        assert_eq!(doc.text, "just text #hashtag is not a heading");
    }

    #[test]
    fn markdown_heading_rules() {
        assert_eq!(atx_heading("# Title"), Some("Title"));
        assert_eq!(atx_heading("   ### x #"), Some("x"));
        assert_eq!(atx_heading("# C#"), Some("C#"));
        assert_eq!(atx_heading("#"), Some(""));
        assert_eq!(atx_heading("####### seven"), None);
        assert_eq!(atx_heading("    # indented code"), None);
        assert_eq!(atx_heading("#tag"), None);
    }

    #[test]
    fn markdown_errors() {
        let err = parse_markdown("m.md", b"# ok\n\xc3").unwrap_err();
        assert_eq!(err.to_string(), "invalid utf-8 in `m.md` at byte 5");
        let err = parse_markdown("m.md", b"").unwrap_err();
        assert!(matches!(err, IngestError::InvalidField { ref field, .. } if field == "text"));
    }

    #[test]
    fn plain_text_title() {
        let doc = parse_plain_text("t.txt", b"\n  Short title \nBody here.\n").unwrap();
        assert_eq!(doc.title, "Short title");
        assert_eq!(doc.text, "Short title Body here.");

        let long = format!("{}\nmore", "word ".repeat(30));
        let doc = parse_plain_text("t.txt", long.as_bytes()).unwrap();
        assert_eq!(doc.title, "");
        assert!(parse_plain_text("t.txt", b"\x80").is_err());
    }

    #[test]
    fn file_dispatch() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let a = dir.path().join("same.MD");
        let b = sub.join("same.md");
        std::fs::write(&a, "# A\ntext a").unwrap();
        std::fs::write(&b, "# B\ntext b").unwrap();
        let pa = parse_file(&a).unwrap();
        let pb = parse_file(&b).unwrap();
        assert_eq!(pa.documents[0].title, "A");
        assert_ne!(pa.documents[0].id, pb.documents[0].id);
        assert_eq!(pa.documents[0].id, a.to_string_lossy());

        let j = dir.path().join("c.ndjson");
        std::fs::write(&j, "{\"id\":1,\"text\":\"x\"}\nbad\n").unwrap();
        let pj = parse_file(&j).unwrap();
        assert_eq!(pj.documents.len(), 1);
        assert_eq!(pj.errors[0].line, 2);

        let t = dir.path().join("d.rst");
        std::fs::write(&t, "# not markdown\nbody").unwrap();
        assert_eq!(parse_file(&t).unwrap().documents[0].title, "# not markdown");

        assert!(matches!(
            parse_file(&dir.path().join("missing.txt")),
            Err(IngestError::Io(_))
        ));
    }
}
