"""LangChain adapters (extra ``attest-client[langchain]``): a retriever and a grounded-answer tool.

>>> from attest.langchain import AttestRetriever, AttestAnswerTool
>>> retriever = AttestRetriever(collection="docs", k=5, filter={"lang": "en"})   # url= or $ATTEST_SERVER
>>> docs = retriever.invoke("how are writes made durable?")      # metadata: score, lanes, provenance
>>> docs = retriever.invoke("how are writes made durable?", k=2, filter=None)   # this call only
>>> tool = AttestAnswerTool(collection="docs")
>>> tool.invoke("how are writes made durable?")                   # cited answer, or Attest's abstention
"""

from __future__ import annotations

from typing import Any, Literal

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import run_in_executor
    from langchain_core.tools import BaseTool
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("attest.langchain needs langchain-core: pip install 'attest-client[langchain]'") from e

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._adapters import with_adapter_client
from .async_client import AsyncClient
from .client import Client
from .grounded import answer_text
from .models import AskResponse, Hit, SearchResponse

#: The retriever's search arguments: each is a field of :class:`AttestRetriever` and may be given per call too.
SEARCH_ARGS = ("k", "lanes", "filter", "tenant", "weights", "rrf_k", "nprobe")


def hit_document(hit: Hit, collection: str, response: SearchResponse) -> Document:
    """A LangChain document of a hit: its text, and in metadata Attest's score, lanes and provenance."""
    metadata: dict[str, Any] = {
        "collection": collection,
        "doc_id": hit.doc_id,
        "chunk_id": hit.chunk_id,
        "title": hit.title,
        "score": hit.score,
        "lanes": hit.lanes.model_dump(exclude_none=True),
        "shard": hit.shard,
        "document_metadata": hit.metadata,
        "degraded": response.degraded,
        "fallback_mode": response.fallback_mode,
        "request_id": response.request_id,
    }
    return Document(id=hit.chunk_id, page_content=hit.text, metadata=metadata)


class AttestRetriever(BaseRetriever):
    """Retrieves chunks from an Attest collection by hybrid search; ``k``, ``lanes``, ``filter``, ``tenant``,
    ``weights``, ``rrf_k`` and ``nprobe`` go to the search as they are.

    Each of them may also be given to ``invoke``/``ainvoke`` (``retriever.invoke(q, k=1, tenant="globex")``):
    it replaces the retriever's own for that call only (``None``: the server's default). Any other keyword
    argument raises :class:`TypeError` rather than being ignored.

    The server: ``client``, else ``url``, else ``$ATTEST_SERVER``, else ``http://127.0.0.1:7700``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    collection: str
    #: The server, when ``client`` is not given: default ``$ATTEST_SERVER``, else ``http://127.0.0.1:7700``.
    url: str | None = None
    client: Client = Field(default_factory=Client)
    async_client: AsyncClient | None = None
    k: int = 4
    lanes: list[str] | None = None
    filter: dict[str, Any] | None = None
    tenant: str | None = None
    weights: dict[str, float] | None = None
    rrf_k: float | None = None
    nprobe: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _client_for_url(cls, data: Any) -> Any:
        return with_adapter_client(data)

    def _search_args(self, per_call: dict[str, Any]) -> dict[str, Any]:
        """The retriever's search arguments, with those given for this call in their place."""
        # BaseRetriever.invoke reads `verbose` for its callbacks but still passes it on with the caller's
        # arguments: it is LangChain's, not a search argument, and not an error.
        unknown = sorted(set(per_call) - set(SEARCH_ARGS) - {"verbose"})
        if unknown:
            raise TypeError(
                f"AttestRetriever got unexpected keyword argument(s) {', '.join(map(repr, unknown))}; "
                f"a call may give {', '.join(SEARCH_ARGS)}"
            )
        return {name: per_call[name] if name in per_call else getattr(self, name) for name in SEARCH_ARGS}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        response = self.client.search(self.collection, query, **self._search_args(kwargs))
        return [hit_document(h, self.collection, response) for h in response.hits]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        args = self._search_args(kwargs)
        if self.async_client is None:
            # What BaseRetriever's default does (the sync client on a worker thread), but with this call's
            # arguments, which its default would drop.
            return await run_in_executor(
                None, self._get_relevant_documents, query, run_manager=run_manager.get_sync(), **kwargs
            )
        response = await self.async_client.search(self.collection, query, **args)
        return [hit_document(h, self.collection, response) for h in response.hits]


class _Question(BaseModel):
    question: str = Field(description="The question to answer from the collection, as a full sentence.")


class AttestAnswerTool(BaseTool):
    """A tool that answers from an Attest collection: Attest's cited answer with its sources, or — when Attest
    abstains — its abstention (reason and suggestions), never an answer of its own. The artifact of a tool call
    is the whole :class:`~attest.models.AskResponse` (citations, claims and verdicts, confidence)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = "attest_answer"
    description: str = (
        "Answers a question from the Attest document collection with citations [n] to its sources. If the "
        "collection does not support an answer, it says that Attest abstained and why: then do not answer "
        "the question from other knowledge."
    )
    args_schema: type[BaseModel] = _Question
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    collection: str
    #: The server, when ``client`` is not given: default ``$ATTEST_SERVER``, else ``http://127.0.0.1:7700``.
    url: str | None = None
    client: Client = Field(default_factory=Client)
    async_client: AsyncClient | None = None
    tenant: str | None = None
    #: Pass on an ``out_of_corpus`` answer (a configured LLM's general knowledge, with its disclaimer) instead
    #: of treating it as an abstention.
    allow_out_of_corpus: bool = False

    @model_validator(mode="before")
    @classmethod
    def _client_for_url(cls, data: Any) -> Any:
        return with_adapter_client(data)

    def _run(self, question: str, run_manager: Any = None) -> tuple[str, AskResponse]:
        response = self.client.ask(self.collection, question, tenant=self.tenant)
        return answer_text(response, self.allow_out_of_corpus), response

    async def _arun(self, question: str, run_manager: Any = None) -> tuple[str, AskResponse]:
        if self.async_client is None:
            return await super()._arun(question, run_manager=run_manager)
        response = await self.async_client.ask(self.collection, question, tenant=self.tenant)
        return answer_text(response, self.allow_out_of_corpus), response
