//! The embedders a router embeds with: its configured one, and each local model that a collection records,
//! loaded (on the blocking pool) the first time that collection needs it. A collection's queries and passages
//! are embedded by the embedder whose identity it records and by no other: vectors of two models share no
//! space, and a search would rank by noise. So changing the configured embedder changes what new collections
//! are filled by, and the collections already filled keep being served by their own model.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use attest_embed::{
    build_embedder, CachedEmbedder, Embedder, EmbedderConfig, LocalEmbedderConfig, LocalModel,
    LocalRuntime,
};
use tokio::sync::OnceCell;

use crate::collection::CollectionRecord;
use crate::error::RouterError;

/// One model's embedders: passages uncached (each chunk is new), queries behind an LRU cache (users repeat them).
#[derive(Clone)]
pub struct ModelEmbedders {
    pub passages: Arc<dyn Embedder>,
    pub queries: Arc<CachedEmbedder<Arc<dyn Embedder>>>,
}

impl ModelEmbedders {
    fn new(embedder: Arc<dyn Embedder>, query_cache_capacity: usize) -> Self {
        ModelEmbedders {
            queries: Arc::new(CachedEmbedder::with_capacity(
                Arc::clone(&embedder),
                query_cache_capacity,
            )),
            passages: embedder,
        }
    }
}

pub struct Embedders {
    configured: ModelEmbedders,
    /// How another local model is run (runtime, threads, ONNX Runtime's library): as the configured one.
    local: LocalEmbedderConfig,
    query_cache_capacity: usize,
    /// The other local models, each loaded once (a failed load is tried again by the next request).
    others: Mutex<HashMap<LocalModel, Arc<OnceCell<ModelEmbedders>>>>,
}

impl Embedders {
    pub fn new(configured: Arc<dyn Embedder>, query_cache_capacity: usize) -> Self {
        Embedders {
            configured: ModelEmbedders::new(configured, query_cache_capacity),
            local: LocalEmbedderConfig::default(),
            query_cache_capacity,
            others: Mutex::default(),
        }
    }

    /// Runs other local models with `local`'s runtime settings (its model and directory are not used).
    pub fn with_local_settings(mut self, local: LocalEmbedderConfig) -> Self {
        self.local = local;
        self
    }

    /// The configured embedder: new collections are filled by it unless they name another model.
    pub fn configured(&self) -> &ModelEmbedders {
        &self.configured
    }

    /// The embedder a new collection asking for `model` is filled by ("": the configured one).
    pub async fn for_new(&self, model: &str) -> Result<ModelEmbedders, RouterError> {
        let configured = self.configured.passages.id();
        if model.is_empty() || model == configured {
            return Ok(self.configured.clone());
        }
        let Some(local) = LocalModel::from_id(model) else {
            return Err(RouterError::invalid(
                "embedder",
                format!(
                    "unknown model `{model}`: this router embeds with {configured}, or with a local model ({})",
                    local_models()
                ),
            ));
        };
        self.local(local).await.map_err(|e| {
            RouterError::FailedPrecondition(format!("embedder {model} cannot be loaded: {e}"))
        })
    }

    /// The embedder that embeds `rec`'s text: the one its record names (the configured one, or a local model
    /// loaded for it); a collection recording a model this router cannot run is `FAILED_PRECONDITION`.
    pub async fn for_collection(
        &self,
        rec: &CollectionRecord,
    ) -> Result<ModelEmbedders, RouterError> {
        let recorded = &rec.embedder;
        let configured = self.configured.passages.identity();
        if recorded.is_unrecorded() || recorded.differences(&configured).is_empty() {
            return Ok(self.configured.clone());
        }
        let refused = |why: String| {
            RouterError::FailedPrecondition(format!(
                "collection `{}` was embedded by {}, and this router embeds with {}: {why}",
                rec.name, recorded.model, configured.model
            ))
        };
        let Some(local) = LocalModel::from_id(&recorded.model) else {
            return Err(refused(format!(
                "run the router with a remote embedder of {} (embedder.remote.model), or send vectors of \
                 that model",
                recorded.model
            )));
        };
        let model = self
            .local(local)
            .await
            .map_err(|e| refused(format!("{} cannot be loaded here: {e}", recorded.model)))?;
        let differs = recorded.differences(&model.passages.identity());
        if !differs.is_empty() {
            return Err(refused(format!(
                "the local {} differs from the recorded one in {}",
                recorded.model,
                differs.join(", ")
            )));
        }
        Ok(model)
    }

    async fn local(&self, model: LocalModel) -> Result<ModelEmbedders, String> {
        let cell = Arc::clone(
            self.others
                .lock()
                .expect("embedders lock")
                .entry(model)
                .or_default(),
        );
        let config = EmbedderConfig {
            local: LocalEmbedderConfig {
                model,
                // Its own directory: a configured `model_dir` holds the configured model.
                model_dir: None,
                // The bge models run under ONNX Runtime only; a router configured with candle still loads them.
                runtime: if model.onnx_only() {
                    LocalRuntime::Onnx
                } else {
                    self.local.runtime
                },
                ..self.local.clone()
            },
            ..EmbedderConfig::default()
        };
        let capacity = self.query_cache_capacity;
        cell.get_or_try_init(|| async move {
            let loaded = tokio::task::spawn_blocking(move || build_embedder(&config))
                .await
                .map_err(|e| format!("loading panicked: {e}"))?
                .map_err(|e| e.to_string())?;
            tracing::info!(
                model = model.id(),
                event = "embedder_loaded",
                "loaded a local model for the collections it embedded"
            );
            Ok(ModelEmbedders::new(loaded, capacity))
        })
        .await
        .cloned()
    }
}

fn local_models() -> String {
    LocalModel::ALL.map(LocalModel::id).join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use attest_embed::{EmbedError, EmbedderIdentity};

    /// A stand-in for a remote embedding service of another model (the only embedder outside this crate's
    /// reach); the local models are the real ones.
    struct Remote;

    impl Embedder for Remote {
        fn id(&self) -> &str {
            "e5-large"
        }
        fn dimension(&self) -> usize {
            1024
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts.iter().map(|_| vec![1.0; 1024]).collect())
        }
        fn count_tokens(&self, text: &str) -> usize {
            text.split_whitespace().count()
        }
    }

    fn record(embedder: EmbedderIdentity) -> CollectionRecord {
        CollectionRecord {
            name: "docs".into(),
            stored_name: "docs".into(),
            shards: 1,
            replication: 1,
            dimension: embedder.dimension,
            index: crate::collection::IndexSettings {
                nlist: 1,
                m: 8,
                nbits: 8,
                nprobe: 1,
                recall_target: None,
            },
            seal_threshold: 0,
            embedder,
            placement: Vec::new(),
            chunking: None,
            thresholds: None,
        }
    }

    fn embedders() -> Embedders {
        Embedders::new(Arc::new(Remote), 16)
    }

    #[tokio::test]
    async fn a_collection_is_embedded_by_the_model_it_records() {
        let e = embedders();
        let own = e
            .for_collection(&record(EmbedderIdentity::of_model("e5-large", 1024)))
            .await
            .unwrap();
        assert_eq!(own.passages.id(), "e5-large");
        assert!(e
            .for_collection(&record(EmbedderIdentity::default()))
            .await
            .is_ok());

        // A local model is loaded for the collection it filled, once.
        let mini = record(LocalModel::MiniLm.identity());
        let first = e.for_collection(&mini).await.unwrap();
        assert_eq!(first.passages.identity(), LocalModel::MiniLm.identity());
        let again = e.for_collection(&mini).await.unwrap();
        assert!(Arc::ptr_eq(&first.passages, &again.passages));
        let v = first.queries.embed(&["a question"]).unwrap();
        assert_eq!(v[0].len(), 384);
    }

    #[tokio::test]
    async fn a_model_this_router_cannot_run_is_refused_naming_both() {
        let e = embedders();
        let err = e
            .for_collection(&record(EmbedderIdentity::of_model(
                "text-embedding-3-small",
                1536,
            )))
            .await
            .err()
            .expect("refused");
        let text = err.to_string();
        assert!(matches!(err, RouterError::FailedPrecondition(_)), "{text}");
        assert!(
            text.contains("text-embedding-3-small") && text.contains("e5-large"),
            "{text}"
        );

        // The local model of that name, but other weights than recorded.
        let other_weights = EmbedderIdentity {
            checksum: "0".repeat(64),
            ..LocalModel::MiniLm.identity()
        };
        let text = e
            .for_collection(&record(other_weights))
            .await
            .err()
            .expect("refused")
            .to_string();
        assert!(text.contains("weights sha256"), "{text}");
    }

    #[tokio::test]
    async fn a_new_collection_takes_the_configured_model_or_a_local_one_it_names() {
        let e = embedders();
        assert_eq!(e.for_new("").await.unwrap().passages.id(), "e5-large");
        assert_eq!(
            e.for_new("e5-large").await.unwrap().passages.id(),
            "e5-large"
        );
        let bge = e.for_new("bge-small-en-v1.5").await.unwrap();
        assert_eq!(bge.passages.identity().pooling, "cls");
        let err = e.for_new("gte-base").await.err().expect("refused");
        assert!(
            matches!(&err, RouterError::InvalidArgument { field, .. } if field == "embedder"),
            "{err}"
        );
        assert!(err.to_string().contains("bge-small-en-v1.5"), "{err}");
    }
}
