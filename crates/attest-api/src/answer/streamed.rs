//! A streamed turn, shared by the HTTP (Server-Sent Events) and gRPC faces: the turn runs as its own task so
//! that its first retrieval's passages ([`AskSources`]) can go out while it reads, generates and verifies; the
//! task is aborted when the turn is dropped (a client that hangs up stops its turn).

use std::sync::Arc;

use attest_answer::client::Caller;
use attest_answer::conversation::HistoryTurn;
use attest_answer::error::AnswerError;
use attest_answer::pipeline::{AnswerService, AskResponse, AskSources};
use tokio::sync::mpsc::UnboundedReceiver;
use tracing::Instrument;

/// One question being answered in the background.
pub struct StreamedTurn {
    sources: UnboundedReceiver<AskSources>,
    task: tokio::task::JoinHandle<Result<AskResponse, AnswerError>>,
}

impl StreamedTurn {
    /// Starts answering `question` (after `history`) in a task of its own, inside the current span (the
    /// request's, so that the turn's logs carry its `request_id`).
    pub fn start(
        service: Arc<AnswerService>,
        caller: Caller,
        collection: String,
        question: String,
        history: Vec<HistoryTurn>,
        request_id: String,
    ) -> Self {
        let (sources_to, sources) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(
            async move {
                service
                    .ask_streamed(
                        &caller,
                        &collection,
                        &question,
                        &history,
                        &request_id,
                        sources_to,
                    )
                    .await
            }
            .instrument(tracing::Span::current()),
        );
        StreamedTurn { sources, task }
    }

    /// The first retrieval's passages, ranked; `None` when the turn ended (or failed) before retrieving.
    pub async fn sources(&mut self) -> Option<AskSources> {
        self.sources.recv().await
    }

    /// The turn's response (a task that panicked is an internal error).
    pub async fn ended(&mut self) -> Result<AskResponse, AnswerError> {
        (&mut self.task).await.map_err(|e| {
            AnswerError::Callee(attest_proto::ApiError::new(
                attest_proto::ErrorCode::Internal,
                format!("the answer task failed: {e}"),
            ))
        })?
    }
}

impl Drop for StreamedTurn {
    fn drop(&mut self) {
        self.task.abort();
    }
}
