//! `attest.v1.RouterService` for internal callers: the same `Router` as the HTTP API.

use std::sync::Arc;

use attest_ingest::SourceDocument;
use attest_proto::v1 as pb;
use attest_proto::v1::router_service_server::RouterService;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::collection::CollectionRecord;
use crate::error::RouterError;
use crate::ingest::IngestDocument;
use crate::router::Router;

pub struct RouterServiceImpl {
    router: Arc<Router>,
}

impl RouterServiceImpl {
    pub fn new(router: Arc<Router>) -> Self {
        RouterServiceImpl { router }
    }
}

fn info(c: &CollectionRecord) -> pb::CollectionInfo {
    pb::CollectionInfo {
        name: c.name.clone(),
        shards: c.shards,
        replication: c.replication,
        spec: Some(pb::CollectionSpec {
            dimension: c.dimension,
            index: Some(pb::IndexParams {
                nlist: c.index.nlist,
                m: c.index.m,
                nbits: c.index.nbits,
                nprobe: c.index.nprobe,
            }),
            seal_threshold: c.seal_threshold,
            embedder: c.embedder.clone(),
        }),
    }
}

/// The caller's request id (or a fresh one) and the span the handler runs in.
fn request_span<T>(req: &Request<T>) -> (String, tracing::Span) {
    let id = attest_telemetry::request_id::from_grpc(req.metadata());
    let span = attest_telemetry::request_id::span(&id);
    (id, span)
}

#[tonic::async_trait]
impl RouterService for RouterServiceImpl {
    async fn create_collection(
        &self,
        req: Request<pb::CreateCollectionRequest>,
    ) -> Result<Response<pb::CollectionInfo>, Status> {
        let (id, span) = request_span(&req);
        let rec = self
            .router
            .create_collection(req.into_inner(), &id)
            .instrument(span)
            .await?;
        Ok(Response::new(info(&rec)))
    }

    async fn list_collections(
        &self,
        _req: Request<pb::ListCollectionsRequest>,
    ) -> Result<Response<pb::ListCollectionsResponse>, Status> {
        Ok(Response::new(pb::ListCollectionsResponse {
            collections: self.router.collections().iter().map(info).collect(),
        }))
    }

    async fn drop_collection(
        &self,
        req: Request<pb::DropCollectionRequest>,
    ) -> Result<Response<pb::DropCollectionResponse>, Status> {
        let (id, span) = request_span(&req);
        self.router
            .drop_collection(&req.into_inner().name, &id)
            .instrument(span)
            .await?;
        Ok(Response::new(pb::DropCollectionResponse { dropped: true }))
    }

    async fn ingest(
        &self,
        req: Request<pb::IngestRequest>,
    ) -> Result<Response<pb::IngestResponse>, Status> {
        let (id, span) = request_span(&req);
        let r = req.into_inner();
        let docs = r
            .documents
            .into_iter()
            .enumerate()
            .map(|(i, d)| {
                let metadata = if d.metadata_json.is_empty() {
                    Default::default()
                } else {
                    serde_json::from_str(&d.metadata_json).map_err(|e| {
                        RouterError::invalid(format!("documents[{i}].metadata_json"), e.to_string())
                    })?
                };
                Ok(IngestDocument {
                    source: SourceDocument {
                        id: d.id,
                        title: attest_ingest::normalize_text(&d.title),
                        text: attest_ingest::normalize_text(&d.text),
                        metadata,
                        tenant: (!d.tenant.is_empty()).then_some(d.tenant),
                    },
                    vector: None,
                })
            })
            .collect::<Result<Vec<_>, RouterError>>()?;
        let report = self
            .router
            .ingest(&r.collection, docs, &id)
            .instrument(span)
            .await?;
        Ok(Response::new(pb::IngestResponse {
            accepted: report.accepted,
            rejected: report
                .duplicates
                .iter()
                .map(|(i, other)| pb::Rejected {
                    index: *i as u32,
                    reason: format!("near-duplicate of document `{other}`"),
                })
                .chain(report.rejected.iter().map(|(i, why)| pb::Rejected {
                    index: *i as u32,
                    reason: why.clone(),
                }))
                .collect(),
            duplicates: report.duplicates.len() as u32,
            chunks: report.chunks,
        }))
    }

    async fn delete_document(
        &self,
        req: Request<pb::DeleteDocumentRequest>,
    ) -> Result<Response<pb::DeleteDocumentResponse>, Status> {
        let (id, span) = request_span(&req);
        let r = req.into_inner();
        let deleted = self
            .router
            .delete_document(&r.collection, Some(&r.tenant), &r.id, &id)
            .instrument(span)
            .await?;
        Ok(Response::new(pb::DeleteDocumentResponse { deleted }))
    }

    async fn search(
        &self,
        req: Request<pb::SearchRequest>,
    ) -> Result<Response<pb::SearchResponse>, Status> {
        let (id, span) = request_span(&req);
        Ok(Response::new(
            self.router
                .search(req.into_inner(), id)
                .instrument(span)
                .await?,
        ))
    }
}
