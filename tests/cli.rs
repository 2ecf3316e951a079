//! The client commands as a new user meets them: a typo in `--collection` creates nothing, a binary file in a
//! directory is skipped (not fatal), a directory with nothing to ingest is an error, a bad `--server` is named,
//! index parameters and JSONL fields the server cannot take are named, and `--help` documents every argument.
//! The OpenAPI contract: what `attest dev` serves at `/v1/openapi.json` (open) is `attest openapi`'s output and the
//! committed docs/openapi.json, and every operation it says needs a scope refuses a key without it.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::http;
use serde_json::{json, Value};

fn attest(server: &str, args: &[&str]) -> Output {
    Command::new(common::attest_bin())
        .args(args)
        .env("ATTEST_SERVER", server)
        .env("ATTEST_LOG", "warn")
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

fn collections(server: &str) -> Vec<String> {
    let listed: Value = http()
        .get(format!("{server}/v1/collections"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    listed["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).unwrap();
}

#[test]
fn client_commands_refuse_mistakes_and_skip_what_they_cannot_read() {
    let data = tempfile::tempdir().unwrap();
    let dev = common::start_dev(data.path());
    let server = dev.url.clone();
    let files = tempfile::tempdir().unwrap();
    write(
        files.path(),
        "otters.md",
        b"# Otters\n\nSea otters float on their backs and crack shellfish on a stone.\n",
    );
    write(
        files.path(),
        "blob.txt",
        &[0xff, 0xfe, 0x00, 0x81, 0x9f, 0xc3],
    );
    let dir = files.path().to_str().unwrap();

    // A collection that does not exist is an error unless --create says to make it.
    let out = attest(&server, &["ingest", "--collection", "notse", dir]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--create"), "{}", stderr(&out));
    assert!(collections(&server).is_empty(), "nothing was created");

    // The binary file is skipped with a warning; the Markdown file is ingested.
    let out = attest(
        &server,
        &["ingest", "--collection", "notes", "--create", "--json", dir],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("skipping") && stderr(&out).contains("blob.txt"),
        "{}",
        stderr(&out)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["accepted"], 1, "{summary}");
    assert_eq!(summary["skipped_files"], 1, "{summary}");
    assert_eq!(collections(&server), vec!["notes".to_string()]);

    // A directory with nothing ingestible is an error, not "0 files".
    let empty = tempfile::tempdir().unwrap();
    write(empty.path(), "scan.pdf", b"%PDF-1.4");
    let out = attest(
        &server,
        &[
            "ingest",
            "--collection",
            "notes",
            empty.path().to_str().unwrap(),
        ],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no files to ingest"),
        "{}",
        stderr(&out)
    );

    // A --server that is not a URL is named as such.
    let out = attest("notaurl", &["collection", "list"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("`notaurl` is not a valid URL"),
        "{}",
        stderr(&out)
    );

    // Index parameters the collection cannot have are refused naming the field; nothing is created.
    let out = attest(&server, &["collection", "create", "odd", "--m", "7"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("index.m"), "{}", stderr(&out));
    assert_eq!(collections(&server), vec!["notes".to_string()]);

    // A collection may name the local model that embeds it; the CLI says which it got, and an unknown one is
    // refused naming the field.
    let out = attest(
        &server,
        &[
            "collection",
            "create",
            "bge",
            "--embedder",
            "bge-small-en-v1.5",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("embedded by bge-small-en-v1.5"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = attest(
        &server,
        &["collection", "create", "gte", "--embedder", "gte-base"],
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("embedder"), "{}", stderr(&out));
    let out = attest(&server, &["collection", "drop", "bge"]);
    assert!(out.status.success(), "{}", stderr(&out));

    // A JSONL line with a field documents do not have is reported by line, naming the field; the rest goes in.
    let lines = tempfile::tempdir().unwrap();
    write(
        lines.path(),
        "owls.jsonl",
        b"{\"id\": \"o1\", \"text\": \"Barn owls hunt at night.\"}\n\
          {\"id\": \"o2\", \"text\": \"Owls swallow prey whole.\", \"url\": \"x\"}\n",
    );
    let owls = lines.path().join("owls.jsonl");
    let out = attest(
        &server,
        &[
            "ingest",
            "--collection",
            "notes",
            "--json",
            owls.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("owls.jsonl:2: unknown field `url`"),
        "{}",
        stderr(&out)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&summary["accepted"], &summary["malformed_lines"]),
        (&Value::from(1), &Value::from(1)),
        "{summary}"
    );

    // --help documents the arguments.
    let out = attest(&server, &["search", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for documented in [
        "The query text",
        "The collection to search",
        "Hits to return",
    ] {
        assert!(help.contains(documented), "{help}");
    }
}

const ADMIN: &str = "test-admin-key-0123456789abcdef";

/// Mints a key of one scope for every tenant.
fn mint(url: &str, scope: &str) -> String {
    let grant = serde_json::json!({"scopes": [scope], "tenants": ["*"]});
    let (status, body) = common::call("POST", &format!("{url}/v1/keys"), Some(ADMIN), Some(&grant));
    assert_eq!(status, 201, "{body}");
    body["key"].as_str().unwrap().to_string()
}

/// The document states the limits of the process's own configuration, and the API holds what it states: an
/// operator who lowers `router.max_shards`, `router.max_k` or `answer.max_question_bytes` serves a contract that
/// says so; the limit itself is accepted and one past it refused, naming the field.
#[test]
fn the_served_document_states_the_configured_limits_and_the_api_holds_them() {
    let data = tempfile::tempdir().unwrap();
    let (_dev, line) = common::start_with_env(
        &["dev", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"],
        Some(data.path()),
        common::Logs::Quiet,
        &[
            ("ATTEST__ROUTER__MAX_SHARDS", "3"),
            // Not below `router.default_k` (10), which the configuration check holds it to.
            ("ATTEST__ROUTER__MAX_K", "12"),
            ("ATTEST__ANSWER__MAX_QUESTION_BYTES", "40"),
        ],
    );
    let url = common::value_of(&line, "http=");
    let (status, served) = common::get_text(&format!("{url}/v1/openapi.json"));
    assert_eq!(status, 200, "{served}");
    let doc: Value = serde_json::from_str(&served).unwrap();
    let property =
        |schema: &str, name: &str| doc["components"]["schemas"][schema]["properties"][name].clone();
    assert_eq!(property("CreateCollectionBody", "shards")["maximum"], 3);
    assert_eq!(property("SearchBody", "k")["maximum"], 12);
    assert_eq!(property("AskBody", "question")["maxLength"], 40);

    let refused = |path: &str, body: Value, field: &str| {
        let (s, b) = common::post(&format!("{url}{path}"), &body);
        assert_eq!(
            (s, b["error"]["field"].as_str()),
            (400, Some(field)),
            "{path} {body}: {b}"
        );
    };
    refused(
        "/v1/collections",
        json!({"name": "c", "shards": 4}),
        "shards",
    );
    let (s, b) = common::post(
        &format!("{url}/v1/collections"),
        &json!({"name": "c", "shards": 3}),
    );
    assert_eq!(s, 201, "{b}");
    refused(
        "/v1/collections/c/search",
        json!({"query": "tea", "k": 13}),
        "k",
    );
    let (s, b) = common::post(
        &format!("{url}/v1/collections/c/search"),
        &json!({"query": "tea", "k": 12}),
    );
    assert_eq!(s, 200, "{b}");
    refused(
        "/v1/collections/c/ask",
        json!({"question": "x".repeat(41)}),
        "question",
    );
    // A tenant no key could be granted is refused wherever a request names one.
    refused(
        "/v1/collections/c/search",
        json!({"query": "tea", "tenant": "a b"}),
        "tenant",
    );
}

#[test]
fn the_served_openapi_document_is_the_committed_one_and_its_scopes_hold() {
    let data = tempfile::tempdir().unwrap();
    let (_dev, line) = common::start(
        &[
            "dev",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--admin-key",
            ADMIN,
        ],
        Some(data.path()),
        common::Logs::Quiet,
    );
    let url = common::value_of(&line, "http=");
    // Open: a client reads the contract before it has a key.
    let (status, served) = common::get_text(&format!("{url}/v1/openapi.json"));
    assert_eq!(status, 200, "{served}");
    let printed = String::from_utf8(common::attest_ok(&["openapi"], &[])).unwrap();
    assert!(
        served == printed,
        "`attest openapi` prints another document than `attest dev` serves"
    );
    let committed_path = common::repo_root().join("docs/openapi.json");
    let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
    assert!(
        served == committed,
        "{} differs from what `attest dev` serves at /v1/openapi.json: refresh it with `make openapi` (or \
         `attest openapi --out docs/openapi.json`), review the diff and commit it",
        committed_path.display()
    );

    // The scope each operation names (`security: [{bearer_auth: [scope]}]`) is the one its guard wants: a key
    // one scope lower is refused (403) and no key at all is unauthenticated (401), before any handler runs.
    let doc: Value = serde_json::from_str(&served).unwrap();
    let keys = [("read", mint(&url, "read")), ("write", mint(&url, "write"))];
    let lower = |scope: &str| match scope {
        "admin" => Some(&keys[1].1),
        "write" => Some(&keys[0].1),
        _ => None,
    };
    let client = http();
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let concrete = path.replace("{name}", "docs").replace("{id}", "x");
        for (method, op) in item.as_object().unwrap() {
            let Some(scope) = op["security"][0]["bearer_auth"][0].as_str() else {
                continue;
            };
            let call = |token: Option<&String>| {
                let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                let mut req = client
                    .request(method, format!("{url}{concrete}"))
                    .header("content-type", "application/json")
                    .body("{}");
                if let Some(token) = token {
                    req = req.bearer_auth(token);
                }
                req.send().unwrap().status().as_u16()
            };
            assert_eq!(call(None), 401, "{method} {path} without a key");
            if let Some(key) = lower(scope) {
                assert_eq!(call(Some(key)), 403, "{method} {path} needs `{scope}`");
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 20,
        "only {checked} guarded operations documented"
    );
}

/// `attest eval|bench|train` moved to `attest-lab`: the old commands say so with the command to run (exit 2), and
/// the lab binary runs it.
#[test]
fn the_lab_commands_moved_out_of_the_production_binary_and_say_where() {
    for (command, args) in [
        ("eval", ["--data", "data/squad-sample", "--every", "4"]),
        ("bench", ["--vectors", "1000", "--dim", "8"]),
        ("train", ["verifier", "--json", "--out", "/tmp/x"]),
    ] {
        let out = Command::new(common::attest_bin())
            .arg(command)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let said = stderr(&out);
        let expected = format!("attest-lab {command} {}", args.join(" "));
        assert!(said.contains(&expected), "{said}");
    }
    let help = Command::new(common::lab_bin())
        .arg("--help")
        .output()
        .unwrap();
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for command in ["eval", "bench", "train"] {
        assert!(text.contains(command), "{text}");
    }
    let help = Command::new(common::attest_bin())
        .arg("--help")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        !text.contains("quality gate") && text.contains("serve"),
        "the moved commands are hidden: {text}"
    );
}

/// docs/config.yaml is every key with its default as `attest config check` resolves it (scripts/config-doc.sh):
/// a key added, renamed or given another default fails here until the document is regenerated.
#[test]
fn the_committed_configuration_document_is_what_the_binary_resolves() {
    let root = common::repo_root();
    let out = Command::new(common::attest_bin())
        .args(["config", "check"])
        .current_dir(&root)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let root_text = format!("{}/", root.canonicalize().unwrap().display());
    let resolved = String::from_utf8(out.stdout)
        .unwrap()
        .replace(&root_text, "<repo>/");
    let committed = std::fs::read_to_string(root.join("docs/config.yaml")).unwrap();
    let committed: String = committed
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        committed == resolved,
        "docs/config.yaml differs from `attest config check`: run `make config-doc` and commit it"
    );
}

/// The README's table of HTTP API v1 and docs/openapi.json name the same operations: a route added, renamed or
/// removed fails here until both say so. The console's routes (`GET /`, `GET /console/{file}`) are pages, not API,
/// and are in the table only.
#[test]
fn the_readme_api_table_names_every_operation_of_the_openapi_document() {
    let root = common::repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let table = readme
        .split("| method and path | body → answer |")
        .nth(1)
        .expect("README has the HTTP API v1 table");
    let mut in_readme = std::collections::BTreeSet::new();
    for row in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cell = row.split('|').nth(1).unwrap();
        let mut last_path = String::new();
        // Each operation is a code span: `METHOD[/METHOD] PATH`, where `.../x` continues the last path's parent.
        for span in cell.split('`').skip(1).step_by(2) {
            let (methods, path) = span.split_once(' ').expect(span);
            let path = match path.strip_prefix(".../") {
                Some(rest) => format!("{}/{rest}", last_path.rsplit_once('/').unwrap().0),
                None => path.to_string(),
            };
            for method in methods.split('/') {
                in_readme.insert(format!("{method} {path}"));
            }
            last_path = path;
        }
    }
    let openapi: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("docs/openapi.json")).unwrap())
            .unwrap();
    let mut in_openapi = std::collections::BTreeSet::new();
    for (path, item) in openapi["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            in_openapi.insert(format!("{} {path}", method.to_uppercase()));
        }
    }
    let pages = ["GET /", "GET /console/{file}"];
    let missing: Vec<_> = in_openapi.difference(&in_readme).collect();
    let unknown: Vec<_> = in_readme
        .difference(&in_openapi)
        .filter(|op| !pages.contains(&op.as_str()))
        .collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "README's API table lacks {missing:?} and names {unknown:?}, which docs/openapi.json does not have"
    );
}

/// `attest dev` on a terminal (a pseudo-terminal from util-linux's `script`, as a user's shell gives it): a short
/// human summary (addresses, data, models, auth, logs) and at most 15 lines in all, instead of every JSON event
/// at info (22 lines before; ONNX Runtime's 1,288 before that).
#[test]
fn attest_dev_on_a_terminal_starts_with_a_short_human_summary() {
    use std::io::{BufRead, BufReader};
    let data = tempfile::tempdir().unwrap();
    let line = format!(
        "{} dev --data-dir {} --http 127.0.0.1:0 --grpc 127.0.0.1:0",
        common::attest_bin().display(),
        data.path().join("dev").display()
    );
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env_remove("ATTEST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("util-linux `script` runs");
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut proc = common::Proc(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut lines: Vec<String> = Vec::new();
    while !lines.iter().any(|l| l.trim_start().starts_with("logs ")) {
        match rx.recv_timeout(std::time::Duration::from_secs(120)) {
            Ok(line) => lines.push(line.trim_end_matches('\r').to_string()),
            Err(_) => panic!("no start-up summary on the terminal: {lines:#?}"),
        }
    }
    proc.terminate();
    let text = lines.join("\n");
    assert!(lines.len() <= 15, "{} start-up lines: {text}", lines.len());
    for part in [
        "attest dev listening http=http://127.0.0.1:",
        "HTTP API  http://127.0.0.1:",
        "data      ",
        "embedder  bge-small-en-v1.5 (local)",
        "answers   the reader",
        "auth      off",
    ] {
        assert!(text.contains(part), "{part:?} missing: {text}");
    }
    // Info events stay off the terminal unless asked for; the one warning (auth off) is there.
    assert!(!text.contains("\"level\":\"INFO\""), "{text}");
}
