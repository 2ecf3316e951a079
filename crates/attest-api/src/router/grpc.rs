//! `attest.v1.RouterService` for internal callers: the same `Router` as the HTTP API.

use std::sync::Arc;

use attest_auth::audit::Action;
use attest_auth::Principal;
use attest_ingest::SourceDocument;
use attest_proto::v1 as pb;
use attest_proto::v1::router_service_server::RouterService;
use attest_router::access::{self, audited, Op};
use attest_router::collection::CollectionRecord;
use attest_router::error::RouterError;
use attest_router::ingest::IngestDocument;
use attest_router::keys::KeyGrant;
use attest_router::router::Router;
use tonic::{Request, Response, Status};
use tracing::Instrument;

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
            index: Some(c.index.to_proto()),
            seal_threshold: c.seal_threshold,
            embedder: c.embedder.model.clone(),
            embedder_identity: attest_router::collection::identity_to_proto(&c.embedder),
        }),
    }
}

impl RouterServiceImpl {
    /// The caller, authenticated and holding the operation's scope.
    async fn caller<T: Sync>(&self, req: &Request<T>, op: Op) -> Result<Principal, Status> {
        attest_auth::grpc::principal(self.router.key_ring(), req, op.scope()).await
    }

    fn default_tenant(&self) -> &str {
        &self.router.config().default_tenant
    }
}

/// The caller's request id (or a fresh one) and the span the handler runs in (the caller's trace its parent).
fn request_span<T>(req: &Request<T>) -> (String, tracing::Span) {
    attest_telemetry::request_id::grpc_span(req.metadata())
}

#[tonic::async_trait]
impl RouterService for RouterServiceImpl {
    async fn create_collection(
        &self,
        req: Request<pb::CreateCollectionRequest>,
    ) -> Result<Response<pb::CollectionInfo>, Status> {
        let p = self.caller(&req, Op::CreateCollection).await?;
        let (id, span) = request_span(&req);
        let r = req.into_inner();
        access::collection(&p, &r.name)?;
        let name = r.name.clone();
        let created = self
            .router
            .collections()
            .create(r, &id)
            .instrument(span)
            .await;
        let rec = audited(
            &p,
            Action::new("create_collection").collection(&name),
            created,
        )?;
        Ok(Response::new(info(&rec)))
    }

    async fn list_collections(
        &self,
        req: Request<pb::ListCollectionsRequest>,
    ) -> Result<Response<pb::ListCollectionsResponse>, Status> {
        let p = self.caller(&req, Op::ListCollections).await?;
        Ok(Response::new(pb::ListCollectionsResponse {
            collections: self
                .router
                .collections()
                .list()
                .iter()
                .filter(|c| p.sees_collection(&c.name))
                .map(info)
                .collect(),
        }))
    }

    async fn drop_collection(
        &self,
        req: Request<pb::DropCollectionRequest>,
    ) -> Result<Response<pb::DropCollectionResponse>, Status> {
        let p = self.caller(&req, Op::DropCollection).await?;
        let (id, span) = request_span(&req);
        let name = req.into_inner().name;
        access::collection(&p, &name)?;
        let router = &self.router;
        let dropped = async {
            attest_router::tenant_scope::whole_collection(
                router.collections(),
                &p,
                "drop",
                &name,
                &id,
            )
            .await?;
            router.collections().remove(&name, &id).await
        }
        .instrument(span)
        .await;
        audited(
            &p,
            Action::new("drop_collection").collection(&name),
            dropped,
        )?;
        Ok(Response::new(pb::DropCollectionResponse { dropped: true }))
    }

    async fn ingest(
        &self,
        req: Request<pb::IngestRequest>,
    ) -> Result<Response<pb::IngestResponse>, Status> {
        let p = self.caller(&req, Op::Ingest).await?;
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
                    vector: (!d.vector.is_empty()).then_some(d.vector),
                })
            })
            .collect::<Result<Vec<_>, RouterError>>()?;
        let mut docs = docs;
        let tenants = access::ingest(&p, &r.collection, &mut docs, self.default_tenant())?;
        let ingested = self
            .router
            .ingest()
            .run(&r.collection, docs, &id)
            .instrument(span)
            .await;
        let tenants = tenants.join(",");
        let action = Action::new("ingest")
            .collection(&r.collection)
            .tenant(&tenants);
        let report = audited(&p, action, ingested)?;
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
        let p = self.caller(&req, Op::DeleteDocument).await?;
        let (id, span) = request_span(&req);
        let r = req.into_inner();
        let tenant = access::delete(&p, &r.collection, Some(&r.tenant), self.default_tenant())?;
        let outcome = self
            .router
            .ingest()
            .delete(&r.collection, Some(&tenant), &r.id, &id)
            .instrument(span)
            .await;
        let action = Action::new("delete_document")
            .collection(&r.collection)
            .tenant(&tenant)
            .target(&r.id);
        let deleted = access::audited_delete(&p, action, outcome)?;
        Ok(Response::new(pb::DeleteDocumentResponse { deleted }))
    }

    async fn search(
        &self,
        req: Request<pb::SearchRequest>,
    ) -> Result<Response<pb::SearchResponse>, Status> {
        let p = self.caller(&req, Op::Search).await?;
        let (id, span) = request_span(&req);
        let mut r = req.into_inner();
        access::search(&p, &mut r, self.default_tenant())?;
        Ok(Response::new(
            self.router.search().run(r, id).instrument(span).await?,
        ))
    }

    async fn search_batch(
        &self,
        req: Request<pb::SearchBatchRequest>,
    ) -> Result<Response<pb::SearchBatchResponse>, Status> {
        let p = self.caller(&req, Op::Search).await?;
        let (id, span) = request_span(&req);
        let mut searches = req.into_inner().searches;
        for r in &mut searches {
            access::search(&p, r, self.default_tenant())?;
        }
        Ok(Response::new(
            self.router
                .search()
                .batch(searches, id)
                .instrument(span)
                .await?,
        ))
    }

    async fn create_key(
        &self,
        req: Request<pb::CreateKeyRequest>,
    ) -> Result<Response<pb::CreateKeyResponse>, Status> {
        let p = self.caller(&req, Op::ManageKeys).await?;
        let r = req.into_inner();
        let grant = KeyGrant {
            scopes: r.scopes,
            tenants: r.tenants,
            collections: r.collections,
            expires_in: (!r.expires_in.is_empty()).then_some(r.expires_in),
        };
        let (key, info) = self.router.keys().create(&p, grant).await?;
        Ok(Response::new(pb::CreateKeyResponse {
            key,
            info: Some(info),
        }))
    }

    async fn list_keys(
        &self,
        req: Request<pb::ListKeysRequest>,
    ) -> Result<Response<pb::ListKeysResponse>, Status> {
        let p = self.caller(&req, Op::ManageKeys).await?;
        Ok(Response::new(pb::ListKeysResponse {
            keys: self.router.keys().list(&p).await?,
        }))
    }

    async fn revoke_key(
        &self,
        req: Request<pb::RevokeKeyRequest>,
    ) -> Result<Response<pb::ApiKeyInfo>, Status> {
        let p = self.caller(&req, Op::ManageKeys).await?;
        let id = req.into_inner().id;
        let key = self.router.keys().revoke(&p, &id).await?;
        Ok(Response::new(key))
    }
}
