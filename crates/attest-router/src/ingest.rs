//! Ingest on the router: validate every document (one bad document fails the request, nothing written), drop
//! repeated ids and near-duplicates (asked of the shards, [`crate::near_dups`]), chunk, embed (one blocking batch), place by document id and write to a
//! quorum of each shard's replicas at one version; and versioned deletes.

use std::collections::HashMap;
use std::sync::Arc;

use attest_core::limits;
use attest_embed::Embedder;
use attest_ingest::{chunk_document, Sketch, SourceDocument, TokenCounter};
use attest_proto::v1 as pb;
use tracing::warn;

use crate::collection::CollectionRecord;
use crate::error::RouterError;
use crate::near_dups::keys_to_proto;
use crate::replicas::{call_all, call_any, ReplicaEndpoint, ShardCall};
use crate::shared::{shard_for, Shared};

/// A document to ingest, optionally with its own vector (then it is stored as one chunk, not re-embedded).
#[derive(Debug, Clone)]
pub struct IngestDocument {
    pub source: SourceDocument,
    pub vector: Option<Vec<f32>>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct IngestReport {
    /// Documents stored.
    pub accepted: u32,
    /// (position in the request, the stored document it nearly duplicates).
    pub duplicates: Vec<(usize, String)>,
    /// (position in the request, why it was not stored) for the other refusals: an id that occurs again
    /// later in the same request (the last occurrence wins, as it would in two requests).
    pub rejected: Vec<(usize, String)>,
    pub chunks: u64,
}

/// A document to write, its near-duplicate sketch and its chunks as (chunk id, text).
type ChunkedDocument = (IngestDocument, Option<Sketch>, Vec<(String, String)>);

/// The embedder's tokenizer counts the chunker's budget, so chunks fit the model's window.
struct EmbedderTokens<'a>(&'a dyn Embedder);

impl TokenCounter for EmbedderTokens<'_> {
    fn count_tokens(&self, text: &str) -> usize {
        self.0.count_tokens(text)
    }
}

/// Why document `i` of a request is refused, its field named by its path (`documents[3].title`).
pub fn document_error(i: usize, e: attest_ingest::IngestError) -> RouterError {
    match e {
        attest_ingest::IngestError::InvalidField { field, reason } => {
            RouterError::invalid(format!("documents[{i}].{field}"), reason)
        }
        other => RouterError::invalid(format!("documents[{i}]"), other.to_string()),
    }
}

fn check_vector(v: &[f32], dim: usize, field: &str) -> Result<(), RouterError> {
    match limits::vector_problem(v, dim) {
        Some(problem) => Err(RouterError::invalid(field, problem)),
        None => Ok(()),
    }
}

/// Ingest: documents validated, chunked, embedded and written to a quorum of their shard's replicas; deletes.
#[derive(Clone)]
pub struct Ingest {
    pub(crate) shared: Arc<Shared>,
}

impl Ingest {
    pub(crate) fn new(shared: &Arc<Shared>) -> Self {
        Ingest {
            shared: Arc::clone(shared),
        }
    }

    /// The body of [`Ingest::run`] (which counts it, [`crate::measured`]): validates every document (one bad
    /// document fails the whole request and nothing is written), drops near duplicates, chunks, embeds and writes
    /// each document to its shard. Returns once every shard acknowledged durably.
    pub(crate) async fn ingest_unmeasured(
        &self,
        collection: &str,
        docs: Vec<IngestDocument>,
        request_id: &str,
    ) -> Result<IngestReport, RouterError> {
        let (rec, copy) = self.shared.view.get_with_copy(collection)?;
        if docs.len() > self.shared.config.max_batch_documents {
            return Err(RouterError::PayloadTooLarge(format!(
                "at most {} documents per request",
                self.shared.config.max_batch_documents
            )));
        }
        let dim = rec.dimension as usize;
        let mut docs = docs;
        for (i, d) in docs.iter_mut().enumerate() {
            d.source
                .validate(&self.shared.config.limits)
                .map_err(|e| document_error(i, e))?;
            if d.source.text.trim().is_empty() {
                return Err(RouterError::invalid(
                    format!("documents[{i}].text"),
                    "empty",
                ));
            }
            if let Some(v) = &d.vector {
                check_vector(v, dim, &format!("documents[{i}].vector"))?;
            }
            if d.source.tenant.as_deref().is_none_or(str::is_empty) {
                d.source.tenant = Some(self.shared.config.default_tenant.clone());
            }
        }

        let mut report = IngestReport::default();
        let mut last_position: HashMap<&str, usize> = HashMap::new();
        for (i, d) in docs.iter().enumerate() {
            last_position.insert(d.source.id.as_str(), i);
        }
        let superseded: Vec<bool> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| last_position[d.source.id.as_str()] != i)
            .collect();
        drop(last_position);
        let check = self
            .check_near_duplicates(&rec, &docs, &superseded, request_id)
            .await?;
        let mut kept = Vec::with_capacity(docs.len());
        for (i, (d, sketch)) in docs.into_iter().zip(check.sketches).enumerate() {
            if superseded[i] {
                report
                    .rejected
                    .push((i, "duplicate id in batch".to_string()));
            } else if let Some(other) = &check.duplicate_of[i] {
                report.duplicates.push((i, other.clone()));
            } else {
                kept.push((d, sketch));
            }
        }

        // Chunk, then embed every chunk that did not come with its vector, in one blocking batch.
        // Text is embedded by the collection's own model; documents that all brought vectors need none.
        let embedder = if kept.iter().any(|(d, _)| d.vector.is_none()) {
            self.shared.embedders.for_collection(&rec).await?.passages
        } else {
            Arc::clone(&self.shared.embedders.configured().passages)
        };
        let chunking = rec
            .chunking
            .clone()
            .unwrap_or_else(|| self.shared.config.chunking.clone());
        let rid = request_id.to_string();
        let dedup = self.shared.config.dedup.clone();
        let prepared = attest_telemetry::cpu::run_cpu_intensive(
            move || -> Result<Vec<pb::DocumentChunks>, RouterError> {
                attest_telemetry::request_id::with_current(&rid, || {
                    let counter = EmbedderTokens(embedder.as_ref());
                    let mut per_doc: Vec<ChunkedDocument> = Vec::with_capacity(kept.len());
                    let mut to_embed: Vec<String> = Vec::new();
                    for (d, sketch) in kept {
                        let chunks: Vec<(String, String)> = if d.vector.is_some() {
                            let text = if d.source.title.is_empty() {
                                d.source.text.clone()
                            } else {
                                format!("{}\n{}", d.source.title, d.source.text)
                            };
                            vec![(format!("{}#0", d.source.id), text)]
                        } else {
                            chunk_document(&d.source, &chunking, &counter)
                                .into_iter()
                                .map(|c| (format!("{}#{}", d.source.id, c.ordinal), c.text))
                                .collect()
                        };
                        if d.vector.is_none() {
                            to_embed.extend(chunks.iter().map(|(_, t)| t.clone()));
                        }
                        per_doc.push((d, sketch, chunks));
                    }
                    let refs: Vec<&str> = to_embed.iter().map(String::as_str).collect();
                    let mut vectors = embedder
                        .embed(&refs)
                        .map_err(|e| RouterError::Unavailable(format!("embedding failed: {e}")))?
                        .into_iter();
                    let mut out = Vec::with_capacity(per_doc.len());
                    for (d, sketch, chunks) in per_doc {
                        let metadata_json =
                            serde_json::Value::Object(d.source.metadata.clone()).to_string();
                        let records = chunks
                            .into_iter()
                            .map(|(chunk_id, text)| pb::ChunkRecord {
                                chunk_id,
                                title: d.source.title.clone(),
                                text,
                                metadata_json: metadata_json.clone(),
                                vector: match &d.vector {
                                    Some(v) => v.clone(),
                                    None => vectors.next().unwrap_or_default(),
                                },
                            })
                            .collect();
                        out.push(pb::DocumentChunks {
                            doc_id: d.source.id.clone(),
                            tenant: d.source.tenant.clone().unwrap_or_default(),
                            chunks: records,
                            version: 0,
                            near_dup: sketch.as_ref().map(|s| keys_to_proto(s, &dedup)),
                        });
                    }
                    Ok(out)
                })
            },
        )
        .await
        .map_err(|e| RouterError::Internal(e.to_string()))??;

        report.accepted = prepared.len() as u32;
        report.chunks = prepared.iter().map(|d| d.chunks.len() as u64).sum();
        let mut prepared = prepared;
        for d in &mut prepared {
            d.version = self.shared.clock.next();
        }
        // A re-embedding of this collection is building its copy: the write lands there too, at the same
        // versions, so the copy misses nothing written while it is filled.
        let for_copy = copy.as_ref().map(|_| prepared.clone());
        let written = self.write_documents(&rec, prepared, request_id).await;
        if let (Some(copy), Some(docs)) = (copy, for_copy) {
            let mirrored = self.write_to_copy(&copy, docs, request_id).await;
            // The collection switched to the copy while this write ran (the old shards refused it as they were
            // dropped): the copy holding it is the collection holding it.
            if written.is_err()
                && mirrored
                && self.shared.switched_from(&rec.name, &rec.stored_name).await
            {
                return Ok(report);
            }
        }
        written.map(|()| report)
    }

    /// Writes documents at their versions to their shards of `rec`. Every replica of a shard gets the same
    /// documents at the same versions; the write counts once a quorum of the replica set holds it durably (the
    /// others still get it, or catch up from a peer).
    pub(crate) async fn write_documents(
        &self,
        rec: &CollectionRecord,
        documents: Vec<pb::DocumentChunks>,
        request_id: &str,
    ) -> Result<(), RouterError> {
        let mut by_shard: HashMap<u32, Vec<pb::DocumentChunks>> = HashMap::new();
        for d in documents {
            by_shard
                .entry(shard_for(&d.doc_id, rec.shards))
                .or_default()
                .push(d);
        }
        let writes = by_shard.into_iter().map(|(shard, documents)| {
            let replicas = self.shared.view.write_replicas(rec, shard as usize);
            let quorum = self.shared.write_quorum(replicas.len());
            let call = ShardCall::Upsert {
                request_id: request_id.to_string(),
                req: pb::UpsertRequest {
                    collection: rec.stored_name.clone(),
                    shard,
                    documents,
                },
            };
            let policy = &self.shared.config.replicas;
            async move { call_all(&replicas, call, quorum, policy).await }
        });
        for outcome in futures::future::join_all(writes).await {
            outcome.into_result().map_err(RouterError::from_status)?;
        }
        Ok(())
    }

    /// The same documents with every chunk's vector computed anew by `rec`'s embedder (a re-embedding's copy:
    /// the chunks and their texts stay as they are).
    pub(crate) async fn reembedded(
        &self,
        rec: &CollectionRecord,
        mut documents: Vec<pb::DocumentChunks>,
        request_id: &str,
    ) -> Result<Vec<pb::DocumentChunks>, RouterError> {
        let embedder = self.shared.embedders.for_collection(rec).await?.passages;
        let rid = request_id.to_string();
        attest_telemetry::cpu::run_cpu_intensive(move || {
            attest_telemetry::request_id::with_current(&rid, || {
                let texts: Vec<&str> = documents
                    .iter()
                    .flat_map(|d| d.chunks.iter().map(|c| c.text.as_str()))
                    .collect();
                let vectors = embedder
                    .embed(&texts)
                    .map_err(|e| RouterError::Unavailable(format!("embedding failed: {e}")))?;
                let mut vectors = vectors.into_iter();
                for chunk in documents.iter_mut().flat_map(|d| d.chunks.iter_mut()) {
                    chunk.vector = vectors.next().unwrap_or_default();
                }
                Ok(documents)
            })
        })
        .await
        .map_err(|e| RouterError::Internal(e.to_string()))?
    }

    /// A write mirrored into a re-embedding's copy. A failure does not fail the write (the collection took
    /// it): the job's closing comparison of versions copies whatever the copy missed.
    /// Returns whether the copy took it.
    async fn write_to_copy(
        &self,
        copy: &CollectionRecord,
        documents: Vec<pb::DocumentChunks>,
        request_id: &str,
    ) -> bool {
        let written = match self.reembedded(copy, documents, request_id).await {
            Ok(docs) => self.write_documents(copy, docs, request_id).await,
            Err(e) => Err(e),
        };
        if let Err(e) = &written {
            warn!(copy = %copy.stored_name, error = %e, event = "reembed_mirror_failed",
                "a write did not reach the re-embedding's copy; the job copies it before switching");
        }
        written.is_ok()
    }

    /// The body of [`Ingest::delete`] (which counts it, [`crate::measured`]).
    pub(crate) async fn delete_document_unmeasured(
        &self,
        collection: &str,
        tenant: Option<&str>,
        doc_id: &str,
        request_id: &str,
    ) -> Result<bool, RouterError> {
        let (rec, copy) = self.shared.view.get_with_copy(collection)?;
        let shard = shard_for(doc_id, rec.shards);
        let tenant = self.shared.config.tenant_or_default(tenant).to_string();
        let replicas = self.shared.view.write_replicas(&rec, shard as usize);
        if self
            .held_by_no_replica(
                &rec.stored_name,
                shard,
                &tenant,
                doc_id,
                &replicas,
                request_id,
            )
            .await
        {
            return Ok(false);
        }
        let version = self.shared.clock.next();
        let deleted = self
            .delete_at(&rec, &tenant, doc_id, version, request_id)
            .await;
        // Mirrored into a re-embedding's copy at the same version (a miss is the job's to repair, as for writes).
        if let Some(copy) = copy {
            match self
                .delete_at(&copy, &tenant, doc_id, version, request_id)
                .await
            {
                // As for writes: the collection switched to the copy while this delete ran.
                Ok(in_copy)
                    if deleted.is_err()
                        && self.shared.switched_from(&rec.name, &rec.stored_name).await =>
                {
                    return Ok(in_copy);
                }
                Ok(_) => {}
                Err(e) => {
                    warn!(copy = %copy.stored_name, error = %e, event = "reembed_mirror_failed",
                    "a delete did not reach the re-embedding's copy; the job repeats it before switching")
                }
            }
        }
        deleted
    }

    /// A versioned delete of the tenant's document on a quorum of its shard's replicas of `rec`.
    pub(crate) async fn delete_at(
        &self,
        rec: &CollectionRecord,
        tenant: &str,
        doc_id: &str,
        version: u64,
        request_id: &str,
    ) -> Result<bool, RouterError> {
        let shard = shard_for(doc_id, rec.shards);
        let replicas = self.shared.view.write_replicas(rec, shard as usize);
        let quorum = self.shared.write_quorum(replicas.len());
        let call = ShardCall::Delete {
            request_id: request_id.to_string(),
            req: pb::DeleteRequest {
                collection: rec.stored_name.clone(),
                shard,
                tenant: tenant.to_string(),
                doc_id: doc_id.to_string(),
                version,
            },
        };
        let outcome = call_all(&replicas, call, quorum, &self.shared.config.replicas).await;
        let resp: pb::DeleteResponse = outcome
            .into_result()
            .and_then(TryInto::try_into)
            .map_err(RouterError::from_status)?;
        Ok(resp.deleted)
    }

    /// Whether every replica of the shard answered that it holds no live copy of the tenant's document: then a
    /// delete has nothing to do and writes nothing (a tombstone per request would let any caller grow the logs
    /// without bound). When a replica cannot answer, the delete goes ahead: a replica that has not seen the
    /// document yet must still get the tombstone, or a late copy of the write would bring it back.
    async fn held_by_no_replica(
        &self,
        collection: &str,
        shard: u32,
        tenant: &str,
        doc_id: &str,
        replicas: &[ReplicaEndpoint],
        request_id: &str,
    ) -> bool {
        let asks = replicas.iter().map(|replica| {
            let call = ShardCall::FetchDocuments {
                request_id: request_id.to_string(),
                req: pb::FetchDocumentsRequest {
                    collection: collection.to_string(),
                    shard,
                    docs: vec![pb::DocRef {
                        tenant: tenant.to_string(),
                        doc_id: doc_id.to_string(),
                    }],
                },
            };
            async move {
                call_any(
                    std::slice::from_ref(replica),
                    call,
                    &self.shared.config.replicas,
                )
                .await
                .and_then(|(r, _)| pb::FetchDocumentsResponse::try_from(r))
            }
        });
        futures::future::join_all(asks).await.iter().all(|answer| {
            answer
                .as_ref()
                .is_ok_and(|r| !r.documents.iter().any(|d| d.tenant == tenant))
        })
    }
}
