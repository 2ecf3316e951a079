"""LlamaIndex adapters (extra ``attest-client[llamaindex]``): a retriever and a grounded-answer query engine.

>>> from attest.llamaindex import AttestRetriever, AttestQueryEngine
>>> nodes = AttestRetriever("docs", k=5).retrieve("how are writes made durable?")   # url= or $ATTEST_SERVER
>>> response = AttestQueryEngine(collection="docs").query("how are writes made durable?")
>>> response.response, response.source_nodes          # cited answer and its citations, or the abstention
"""

from __future__ import annotations

from typing import Any

try:
    from llama_index.core.base.response.schema import Response
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.query_engine import CustomQueryEngine
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("attest.llamaindex needs llama-index-core: pip install 'attest-client[llamaindex]'") from e

from pydantic import Field, model_validator

from ._adapters import adapter_client, with_adapter_client
from .async_client import AsyncClient
from .client import Client
from .grounded import answer_text, is_grounded
from .models import AskResponse, Citation, Hit, SearchResponse

# Provenance and scores stay in the metadata but out of the text an LLM or an embedder is given.
_NOT_FOR_MODELS = ["collection", "doc_id", "chunk_id", "score", "lanes", "shard", "degraded", "fallback_mode",
                   "request_id", "n"]


def _node(node_id: str, text: str, doc_id: str, metadata: dict[str, Any]) -> TextNode:
    return TextNode(
        id_=node_id,
        text=text,
        metadata=metadata,
        excluded_llm_metadata_keys=[k for k in _NOT_FOR_MODELS if k in metadata],
        excluded_embed_metadata_keys=[k for k in _NOT_FOR_MODELS if k in metadata],
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc_id)},
    )


def hit_node(hit: Hit, collection: str, response: SearchResponse) -> NodeWithScore:
    """A scored node of a hit: its text, Attest's score, and lanes and provenance in metadata."""
    metadata = {
        "collection": collection, "doc_id": hit.doc_id, "chunk_id": hit.chunk_id, "title": hit.title,
        "score": hit.score, "lanes": hit.lanes.model_dump(exclude_none=True), "shard": hit.shard,
        "degraded": response.degraded, "fallback_mode": response.fallback_mode, "request_id": response.request_id,
        "document_metadata": hit.metadata,
    }
    return NodeWithScore(node=_node(hit.chunk_id, hit.text, hit.doc_id, metadata), score=hit.score)


def citation_node(c: Citation, collection: str) -> NodeWithScore:
    """A source node of a citation: the quoted sentence, footnote ``n`` and provenance in metadata."""
    metadata = {"collection": collection, "doc_id": c.doc_id, "chunk_id": c.chunk_id, "title": c.title, "n": c.n}
    return NodeWithScore(node=_node(c.chunk_id, c.quote, c.doc_id, metadata), score=c.score)


class AttestRetriever(BaseRetriever):
    """Retrieves chunks from an Attest collection by hybrid search, as scored nodes; ``k``, ``lanes``,
    ``filter``, ``tenant``, ``weights``, ``rrf_k`` and ``nprobe`` go to the search as they are.

    LlamaIndex's ``retrieve`` takes nothing but the query; ``k`` is also :attr:`similarity_top_k`, the name
    LlamaIndex's own retrievers give it, settable between calls. The server: ``client``, else ``url``, else
    ``$ATTEST_SERVER``, else ``http://127.0.0.1:7700``."""

    def __init__(
        self,
        collection: str,
        client: Client | None = None,
        *,
        url: str | None = None,
        async_client: AsyncClient | None = None,
        k: int = 4,
        lanes: list[str] | None = None,
        filter: dict[str, Any] | None = None,
        tenant: str | None = None,
        weights: dict[str, float] | None = None,
        rrf_k: float | None = None,
        nprobe: int | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        super().__init__(callback_manager=callback_manager)
        self.collection = collection
        self.client = adapter_client(url, client)
        self.async_client = async_client
        self.search_args: dict[str, Any] = {
            "k": k, "lanes": lanes, "filter": filter, "tenant": tenant, "weights": weights, "rrf_k": rrf_k,
            "nprobe": nprobe,
        }

    @property
    def similarity_top_k(self) -> int:
        """How many nodes a retrieval returns at most (the search's ``k``)."""
        return self.search_args["k"]

    @similarity_top_k.setter
    def similarity_top_k(self, k: int) -> None:
        self.search_args["k"] = k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        response = self.client.search(self.collection, query_bundle.query_str, **self.search_args)
        return [hit_node(h, self.collection, response) for h in response.hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.async_client is None:
            return self._retrieve(query_bundle)
        response = await self.async_client.search(self.collection, query_bundle.query_str, **self.search_args)
        return [hit_node(h, self.collection, response) for h in response.hits]


class AttestQueryEngine(CustomQueryEngine):
    """A query engine whose answer is Attest's grounded answer: ``response`` is the cited text, ``source_nodes``
    its citations (the quoted sentences), ``metadata`` Attest's status, verdict and confidence and the whole
    :class:`~attest.models.AskResponse` (``metadata["attest"]``). When Attest abstains, ``response`` is the
    abstention (reason and suggestions) and there are no source nodes: never an answer made up in its place."""

    collection: str
    #: The server, when ``client`` is not given: default ``$ATTEST_SERVER``, else ``http://127.0.0.1:7700``.
    url: str | None = None
    client: Client = Field(default_factory=Client)
    async_client: AsyncClient | None = None
    tenant: str | None = None
    #: Pass on an ``out_of_corpus`` answer (with its disclaimer) instead of treating it as an abstention.
    allow_out_of_corpus: bool = False

    @model_validator(mode="before")
    @classmethod
    def _client_for_url(cls, data: Any) -> Any:
        return with_adapter_client(data)

    def _response(self, answer: AskResponse) -> Response:
        grounded = is_grounded(answer, self.allow_out_of_corpus)
        return Response(
            response=answer_text(answer, self.allow_out_of_corpus) if not grounded else answer.answer,
            source_nodes=[citation_node(c, self.collection) for c in answer.citations] if grounded else [],
            metadata={
                "status": answer.status,
                "abstained": not grounded,
                "reason": answer.reason,
                "suggestions": answer.suggestions,
                "verdict": answer.verdict,
                "confidence": answer.confidence,
                "degraded": answer.degraded,
                "fallback_mode": answer.fallback_mode,
                "request_id": answer.request_id,
                "attest": answer,
            },
        )

    def custom_query(self, query_str: str) -> Response:
        return self._response(self.client.ask(self.collection, query_str, tenant=self.tenant))

    async def acustom_query(self, query_str: str) -> Response:
        if self.async_client is None:
            return self.custom_query(query_str)
        return self._response(await self.async_client.ask(self.collection, query_str, tenant=self.tenant))
