//! `attest mcp`: a Model Context Protocol server in front of a running Attest, so that an agent can search a
//! collection and ask it for a grounded, cited answer — or be told that the documents do not say, with the
//! reason and what they say instead. It is a client of the router's HTTP API like every other client command
//! (`--server`, the API key in `ATTEST_API_KEY`), so it runs beside the agent, not in the cluster.
//!
//! Tools: `search`, `ask` and `list_collections`; resources: `attest://collections` (every collection the key
//! sees) and `attest://collections/{name}` (one). Transports: stdio (the default, what desktop agents spawn;
//! stdout carries protocol messages only, logs go to stderr) and streamable HTTP (`--http ADDR`, at `/mcp`,
//! loopback hosts only unless `--allowed-host` names more).

use std::net::SocketAddr;

use anyhow::Context;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::cli::McpArgs;
use crate::commands::{call, client, server_url, strings};

/// The URI of the resource listing every collection; one collection is this followed by `/{name}`.
const COLLECTIONS_URI: &str = "attest://collections";

/// What the server tells an agent it is for (MCP's `instructions`).
const INSTRUCTIONS: &str = "Attest answers only from the documents of a collection. `ask` returns a cited \
answer, or an abstention when the documents do not say (with the reason, and what they say instead when a \
passage answers a neighbouring question): report an abstention as such, never guess past it. `search` returns \
the passages themselves. `list_collections` (or the attest://collections resource) names the collections.";

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SearchParams {
    /// The collection to search (default: the one `attest mcp --collection` names).
    #[serde(default)]
    pub collection: Option<String>,
    /// What to search for, in words.
    pub query: String,
    /// How many passages to return (default 10).
    #[serde(default)]
    pub k: Option<u32>,
    /// The tenant whose documents are searched (default: the API key's only tenant).
    #[serde(default)]
    pub tenant: Option<String>,
    /// Metadata filter, e.g. {"lang": "en"} or {"year": {"gte": 2020}}.
    #[serde(default)]
    pub filter: Option<Map<String, Value>>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AskParams {
    /// The collection to ask (default: the one `attest mcp --collection` names).
    #[serde(default)]
    pub collection: Option<String>,
    /// The question, in words.
    pub question: String,
    /// The tenant whose documents answer (default: the API key's only tenant).
    #[serde(default)]
    pub tenant: Option<String>,
}

/// The MCP server: where Attest is, the collection tools default to, and the HTTP client (with the API key).
#[derive(Clone)]
pub struct AttestMcp {
    server: String,
    default_collection: Option<String>,
    http: reqwest::Client,
    #[allow(dead_code)] // read by the code `tool_handler` generates
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl AttestMcp {
    pub fn new(server: &str, default_collection: Option<String>) -> anyhow::Result<Self> {
        Ok(Self {
            server: server_url(server)?,
            default_collection,
            http: client()?,
            tool_router: Self::tool_router(),
        })
    }

    #[tool(
        description = "Search an Attest collection (hybrid dense + BM25): the best passages with their \
                       document, title and score. Use `ask` for an answer."
    )]
    async fn search(&self, Parameters(p): Parameters<SearchParams>) -> CallToolResult {
        let collection = match self.collection(p.collection) {
            Ok(c) => c,
            Err(refusal) => return refusal,
        };
        let mut body = json!({"query": p.query});
        if let Some(k) = p.k {
            body["k"] = json!(k);
        }
        if let Some(tenant) = p.tenant {
            body["tenant"] = json!(tenant);
        }
        if let Some(filter) = p.filter {
            body["filter"] = Value::Object(filter);
        }
        let url = format!("{}/v1/collections/{collection}/search", self.server);
        match call(self.http.post(url).json(&body)).await {
            Ok(found) => result(search_text(&found), found),
            Err(why) => refused("search", &why),
        }
    }

    #[tool(
        description = "Ask an Attest collection a question: a grounded answer with numbered citations (each \
                       claim verified against its passage), or an abstention saying why the documents do not \
                       answer it and, when a passage answers a neighbouring question, what it says instead."
    )]
    async fn ask(&self, Parameters(p): Parameters<AskParams>) -> CallToolResult {
        let collection = match self.collection(p.collection) {
            Ok(c) => c,
            Err(refusal) => return refusal,
        };
        let mut body = json!({"question": p.question});
        if let Some(tenant) = p.tenant {
            body["tenant"] = json!(tenant);
        }
        let url = format!("{}/v1/collections/{collection}/ask", self.server);
        match call(self.http.post(url).json(&body)).await {
            Ok(answer) => result(ask_text(&answer), answer),
            Err(why) => refused("ask", &why),
        }
    }

    #[tool(description = "The Attest collections this API key can see, with their settings.")]
    async fn list_collections(&self) -> CallToolResult {
        match self.collections().await {
            Ok(list) => {
                let names: Vec<&str> = list["collections"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["name"].as_str())
                    .collect();
                let text = if names.is_empty() {
                    "No collections.".to_string()
                } else {
                    format!("Collections: {}", names.join(", "))
                };
                result(text, list)
            }
            Err(why) => refused("list_collections", &why),
        }
    }
}

impl AttestMcp {
    /// The collection a call names, else the default; a tool error the agent can read when there is neither.
    fn collection(&self, named: Option<String>) -> Result<String, CallToolResult> {
        match named.or_else(|| self.default_collection.clone()) {
            Some(name) if !name.trim().is_empty() => Ok(name),
            _ => Err(CallToolResult::error(vec![ContentBlock::text(
                "name a collection (`collection`): this server has no default (`attest mcp --collection`); \
                 `list_collections` names them",
            )])),
        }
    }

    async fn collections(&self) -> anyhow::Result<Value> {
        call(self.http.get(format!("{}/v1/collections", self.server))).await
    }
}

/// A tool's result: text for the model to read and the API's own JSON as structured content.
fn result(text: String, structured: Value) -> CallToolResult {
    let mut out = CallToolResult::structured(structured);
    out.content = vec![ContentBlock::text(text)];
    out
}

/// Attest's refusal (or its absence) as a tool error the agent reads — not a protocol error, which clients
/// show only as "the tool failed".
fn refused(tool: &str, why: &anyhow::Error) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("{tool} failed: {why:#}"))])
}

/// Search hits as numbered passages.
fn search_text(found: &Value) -> String {
    let hits = found["hits"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let mut text = if hits.is_empty() {
        "No passages matched.".to_string()
    } else {
        String::new()
    };
    for (i, hit) in hits.iter().enumerate() {
        text.push_str(&format!(
            "[{}] {} (doc {}, chunk {}, score {:.3})\n{}\n\n",
            i + 1,
            hit["title"].as_str().unwrap_or(""),
            hit["doc_id"].as_str().unwrap_or(""),
            hit["chunk_id"].as_str().unwrap_or(""),
            hit["score"].as_f64().unwrap_or(0.0),
            hit["text"].as_str().unwrap_or("").trim(),
        ));
    }
    if found["fallback_mode"].as_bool() == Some(true) {
        text.push_str("(The embedding service was unavailable: keyword search only.)\n");
    }
    if found["degraded"].as_bool() == Some(true) {
        text.push_str("(Some shards did not answer: results may be incomplete.)\n");
    }
    text.trim_end().to_string()
}

/// An answer with its sources, or the abstention with its reason, the neighbour's fact and the suggestions.
fn ask_text(out: &Value) -> String {
    let mut text = match out["status"].as_str() {
        Some("answered") => format!("{}\n", out["answer"].as_str().unwrap_or("").trim()),
        Some("out_of_corpus") => format!(
            "{}\n{}\n",
            out["answer"].as_str().unwrap_or("").trim(),
            out["disclaimer"].as_str().unwrap_or("")
        ),
        _ => format!(
            "No answer: the documents do not answer this ({}).\n",
            out["reason"].as_str().unwrap_or("abstained")
        ),
    };
    if let Some(message) = out["near_miss"]["message"].as_str() {
        let source = &out["near_miss"]["source"];
        text.push_str(&format!(
            "{message} (see \"{}\", doc {}: \"{}\")\n",
            source["title"].as_str().unwrap_or(""),
            source["doc_id"].as_str().unwrap_or(""),
            source["quote"].as_str().unwrap_or("").trim()
        ));
    }
    let citations = out["citations"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if !citations.is_empty() {
        text.push_str("\nSources:\n");
    }
    for c in citations {
        text.push_str(&format!(
            "[{}] {} (doc {}): \"{}\"\n",
            c["n"],
            c["title"].as_str().unwrap_or(""),
            c["doc_id"].as_str().unwrap_or(""),
            c["quote"].as_str().unwrap_or("").trim()
        ));
    }
    let suggestions: Vec<&str> = strings(&out["suggestions"]);
    if !suggestions.is_empty() {
        text.push_str(&format!("\nYou could ask: {}\n", suggestions.join(" | ")));
    }
    if let Some(confidence) = out["confidence"].as_f64() {
        text.push_str(&format!("\nconfidence {confidence:.2}"));
    }
    text.trim_end().to_string()
}

#[tool_handler]
impl ServerHandler for AttestMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("attest", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let list = self.collections().await.map_err(unavailable)?;
        let mut resources = vec![Resource::new(COLLECTIONS_URI, "collections")
            .with_description("Every collection this API key can see")
            .with_mime_type("application/json")];
        for name in list["collections"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str())
        {
            resources.push(
                Resource::new(format!("{COLLECTIONS_URI}/{name}"), name)
                    .with_description(format!("Collection `{name}`: its settings"))
                    .with_mime_type("application/json"),
            );
        }
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let body = if uri == COLLECTIONS_URI {
            self.collections().await.map_err(unavailable)?
        } else if let Some(name) = uri
            .strip_prefix(COLLECTIONS_URI)
            .and_then(|rest| rest.strip_prefix('/'))
            .filter(|name| !name.is_empty() && !name.contains('/'))
        {
            let url = format!("{}/v1/collections/{name}", self.server);
            call(self.http.get(url)).await.map_err(|why| {
                ErrorData::resource_not_found(format!("{uri}: {why:#}"), Some(json!({"uri": uri})))
            })?
        } else {
            return Err(ErrorData::resource_not_found(
                format!("no resource {uri} (attest://collections or attest://collections/NAME)"),
                Some(json!({"uri": uri})),
            ));
        };
        let text = serde_json::to_string_pretty(&body).unwrap_or_default();
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, uri).with_mime_type("application/json")
        ])
        .into())
    }
}

/// Attest unreachable or refusing, as the protocol error a resource read returns.
fn unavailable(why: anyhow::Error) -> ErrorData {
    ErrorData::internal_error(format!("{why:#}"), None)
}

/// `attest mcp`: serves until stdin closes (stdio) or the process is stopped (HTTP).
pub async fn serve(server: &str, args: McpArgs) -> anyhow::Result<()> {
    let mcp = AttestMcp::new(server, args.collection.clone())?;
    match args.http {
        None => serve_stdio(mcp).await,
        Some(addr) => serve_http(mcp, addr, args.allowed_host).await,
    }
}

async fn serve_stdio(mcp: AttestMcp) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let running = mcp
        .serve(rmcp::transport::stdio())
        .await
        .context("starting the MCP session on stdio")?;
    running.waiting().await.context("MCP session on stdio")?;
    Ok(())
}

async fn serve_http(
    mcp: AttestMcp,
    addr: SocketAddr,
    allowed_hosts: Vec<String>,
) -> anyhow::Result<()> {
    let stop = tokio_util::sync::CancellationToken::new();
    let mut config =
        StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token());
    config.allowed_hosts.extend(allowed_hosts);
    let service: StreamableHttpService<AttestMcp, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(mcp.clone()), Default::default(), config);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr()?;
    // The one line a user (or a test) needs: where to point the agent.
    eprintln!("attest mcp: streamable HTTP on http://{local}/mcp");
    let app = axum::Router::new().nest_service("/mcp", service);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = tokio::signal::ctrl_c().await;
            stop.cancel();
        })
        .await
        .context("serving MCP over HTTP")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_abstention_names_its_reason_and_the_neighbours_fact() {
        let out = json!({
            "status": "abstained", "reason": "unsupported", "answer": "", "citations": [],
            "near_miss": {"message": "The documents give the Drift Mini's charge time, not the Drift Max's.",
                          "source": {"title": "Drift Mini", "doc_id": "d1", "quote": "It charges in 2 hours."}},
            "suggestions": ["What is the Drift Mini's charge time?"], "confidence": 0.1
        });
        let text = ask_text(&out);
        assert!(
            text.starts_with("No answer: the documents do not answer this (unsupported)."),
            "{text}"
        );
        assert!(text.contains("not the Drift Max's"), "{text}");
        assert!(text.contains("\"It charges in 2 hours.\""), "{text}");
        assert!(
            text.contains("You could ask: What is the Drift Mini's charge time?"),
            "{text}"
        );
    }

    #[test]
    fn an_answer_lists_its_sources_by_number() {
        let out = json!({
            "status": "answered", "answer": "Paris [1].", "confidence": 0.91,
            "citations": [{"n": 1, "title": "France", "doc_id": "fr", "quote": "Its capital is Paris."}]
        });
        let text = ask_text(&out);
        assert!(text.starts_with("Paris [1]."), "{text}");
        assert!(
            text.contains("[1] France (doc fr): \"Its capital is Paris.\""),
            "{text}"
        );
        assert!(text.ends_with("confidence 0.91"), "{text}");
    }

    #[test]
    fn a_call_without_a_collection_is_a_readable_tool_error() {
        let mcp = AttestMcp::new("http://127.0.0.1:7700", None).unwrap();
        let refusal = mcp.collection(None).unwrap_err();
        assert_eq!(refusal.is_error, Some(true));
        assert_eq!(mcp.collection(Some("docs".into())).unwrap(), "docs");
        let with_default = AttestMcp::new("http://127.0.0.1:7700", Some("kb".into())).unwrap();
        assert_eq!(with_default.collection(None).unwrap(), "kb");
    }
}
