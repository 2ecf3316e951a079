//! `attest mcp` driven by an MCP client (the Rust SDK's, as an agent would use it) over both transports, against
//! `attest dev` holding the small company corpus of `tests/fixtures/company-nearmiss` (issue 71): the client
//! lists the tools, gets a cited answer, an abstention that names what the documents give instead, passages
//! from `search`, the collections as resources, and a readable tool error for a collection that does not exist.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common;
use crate::near_miss;

use common::{attest_bin, repo_root, start_dev, Proc};
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};

/// How long one MCP call may take (an `ask` reads with the local models on a busy 2-core machine).
const CALL_LIMIT: Duration = Duration::from_secs(120);

type Client = RunningService<RoleClient, ()>;

/// Calls a tool; its result as JSON (`content`, `structuredContent`, `isError`) and its text.
async fn call(client: &Client, tool: &'static str, arguments: Value) -> (Value, String) {
    let params =
        CallToolRequestParams::new(tool).with_arguments(arguments.as_object().unwrap().clone());
    let result = tokio::time::timeout(CALL_LIMIT, client.call_tool(params))
        .await
        .unwrap_or_else(|_| panic!("{tool} took over {CALL_LIMIT:?}"))
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let result = serde_json::to_value(result).unwrap();
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string();
    (result, text)
}

/// What every transport must do: the tools listed, a cited answer, an abstention naming the neighbour's fact.
async fn answers_and_abstains(client: &Client, tenant: &str, twin: &Value, near_miss: &Value) {
    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    for tool in ["search", "ask", "list_collections"] {
        assert!(tools.iter().any(|t| t == tool), "no {tool} in {tools:?}");
    }

    let (answered, text) = call(
        client,
        "ask",
        json!({"question": twin["question"], "tenant": tenant}),
    )
    .await;
    assert_eq!(answered["isError"], false, "{answered}");
    assert_eq!(
        answered["structuredContent"]["status"], "answered",
        "{answered}"
    );
    let gold = twin["answers"][0].as_str().unwrap();
    assert!(text.contains(gold), "the answer lacks {gold:?}: {text}");
    assert!(
        text.contains("Sources:\n[1] "),
        "no numbered source: {text}"
    );
    assert!(text.contains(twin["gold_doc"].as_str().unwrap()), "{text}");

    let (abstained, text) = call(
        client,
        "ask",
        json!({"question": near_miss["question"], "tenant": tenant}),
    )
    .await;
    assert_eq!(
        abstained["isError"], false,
        "an abstention is a result, not an error: {abstained}"
    );
    assert_eq!(
        abstained["structuredContent"]["status"], "abstained",
        "{abstained}"
    );
    assert!(text.starts_with("No answer: "), "{text}");
    let neighbour = near_miss["expected_neighbour"]["name"].as_str().unwrap();
    assert!(
        text.contains(neighbour),
        "the abstention does not name {neighbour:?}: {text}"
    );
    assert!(
        !text.contains("Sources:"),
        "an abstention cites nothing: {text}"
    );
}

#[test]
fn an_mcp_client_gets_cited_answers_abstentions_passages_and_collections_over_stdio_and_http() {
    let fixture = repo_root().join("tests/fixtures/company-nearmiss");
    let questions: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("questions.json")).unwrap())
            .unwrap();
    let tenant = questions["company"].as_str().unwrap().to_string();
    let near_miss = questions["near_misses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["kind"] == "sibling_entity")
        .expect("the fixture has a sibling-entity near miss")
        .clone();
    let twin = near_miss["twin"].clone();

    let data = tempfile::tempdir().unwrap();
    let dev = start_dev(data.path());
    near_miss::ingest(&dev, &fixture.join("corpus.jsonl"));

    // Streamable HTTP: `attest mcp --http 127.0.0.1:0` prints the URL it serves.
    let (http_proc, mcp_url) = start_mcp_http(&dev.url);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        // stdio: the client spawns the server as an agent does.
        let mut command = tokio::process::Command::new(attest_bin());
        command
            .args([
                "mcp",
                "--server",
                &dev.url,
                "--collection",
                near_miss::COLLECTION,
            ])
            .env_remove("ATTEST_API_KEY")
            .stderr(Stdio::null());
        let stdio = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
        answers_and_abstains(&stdio, &tenant, &twin, &near_miss).await;

        let (found, text) = call(
            &stdio,
            "search",
            json!({"query": twin["question"], "tenant": tenant, "k": 3}),
        )
        .await;
        let hits = found["structuredContent"]["hits"].as_array().unwrap();
        assert!(!hits.is_empty() && hits.len() <= 3, "{found}");
        assert!(text.starts_with("[1] "), "{text}");

        let resources: Vec<String> = stdio
            .list_all_resources()
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.uri)
            .collect();
        let one = format!("attest://collections/{}", near_miss::COLLECTION);
        assert!(
            resources.contains(&"attest://collections".to_string()),
            "{resources:?}"
        );
        assert!(resources.contains(&one), "{resources:?}");
        let read = stdio
            .read_resource(ReadResourceRequestParams::new(one))
            .await
            .unwrap();
        let read = serde_json::to_value(read).unwrap();
        let body: Value =
            serde_json::from_str(read["contents"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(body["name"], near_miss::COLLECTION, "{body}");
        assert!(stdio
            .read_resource(ReadResourceRequestParams::new("attest://nothing"))
            .await
            .is_err());

        // A collection that does not exist: a tool error the agent can read, naming the refusal.
        let (missing, text) = call(
            &stdio,
            "ask",
            json!({"question": "Anything?", "collection": "no-such-collection"}),
        )
        .await;
        assert_eq!(missing["isError"], true, "{missing}");
        assert!(text.contains("404"), "{text}");
        stdio.cancel().await.unwrap();

        let http =
            ().serve(StreamableHttpClientTransport::from_uri(mcp_url.as_str()))
                .await
                .unwrap();
        answers_and_abstains(&http, &tenant, &twin, &near_miss).await;
        http.cancel().await.unwrap();
    });
    drop(http_proc);
}

/// Starts `attest mcp --http 127.0.0.1:0` and waits for the line naming its URL; its stderr is drained after
/// that (a full pipe would stall it).
fn start_mcp_http(server: &str) -> (Proc, String) {
    let mut child = Command::new(attest_bin())
        .args([
            "mcp",
            "--server",
            server,
            "--collection",
            near_miss::COLLECTION,
        ])
        .args(["--http", "127.0.0.1:0"])
        .env_remove("ATTEST_API_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let proc = Proc(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if let Some(url) = line.split("streamable HTTP on ").nth(1) {
                let _ = tx.send(url.trim().to_string());
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("attest mcp --http did not say where it serves");
    (proc, url)
}
