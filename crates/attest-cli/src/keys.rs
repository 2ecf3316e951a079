//! `attest key create | list | revoke`: API keys through a running router (admin scope; the caller's key is
//! `ATTEST_API_KEY`, e.g. the admin key the cluster was started with). A created key is printed once.

use serde_json::{json, Value};

use crate::cli::KeyCommand;
use crate::commands::{call, client, server_url};

pub async fn command(server: &str, cmd: KeyCommand) -> anyhow::Result<()> {
    let server = server_url(server)?;
    let http = client()?;
    match cmd {
        KeyCommand::Create {
            scopes,
            tenants,
            collections,
            expires,
            json,
        } => {
            let mut body =
                json!({"scopes": scopes, "tenants": tenants, "collections": collections});
            if let Some(e) = expires {
                body["expires_in"] = json!(e);
            }
            let created = call(http.post(format!("{server}/v1/keys")).json(&body)).await?;
            if json {
                println!("{created}");
            } else {
                println!("{}", created["key"].as_str().unwrap_or_default());
                eprintln!(
                    "key {} created ({}); it is shown only this once",
                    created["id"].as_str().unwrap_or_default(),
                    describe(&created)
                );
            }
        }
        KeyCommand::List { json } => {
            let listed = call(http.get(format!("{server}/v1/keys"))).await?;
            if json {
                println!("{listed}");
            } else {
                for k in listed["keys"].as_array().into_iter().flatten() {
                    println!("{}  {}", k["id"].as_str().unwrap_or_default(), describe(k));
                }
            }
        }
        KeyCommand::Revoke { id } => {
            call(http.delete(format!("{server}/v1/keys/{id}"))).await?;
            println!("revoked {id}");
        }
    }
    Ok(())
}

/// One line about a key: scopes, tenants, collections, expiry, revocation.
fn describe(k: &Value) -> String {
    let list = |v: &Value| {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    };
    let mut out = format!(
        "scopes={} tenants={}",
        list(&k["scopes"]),
        list(&k["tenants"])
    );
    let collections = list(&k["collections"]);
    if !collections.is_empty() {
        out += &format!(" collections={collections}");
    }
    if let Some(ms) = k["expires_at_ms"].as_u64() {
        out += &format!(" expires_at_ms={ms}");
    }
    if k["revoked"].as_bool() == Some(true) {
        out += " revoked";
    }
    out
}
